#!/usr/bin/env python3
"""Derive messy lazy-edit snippets, as chat models write them, from canonical code-apply tasks.

Each task's canonical ``update`` is a set of hunks of the expected file separated by
``... existing code ...`` marker lines.  This script parses it into hunks (line ranges of
``expected``), locates the edit inside each hunk with a line diff of ``original`` and
``expected``, and writes, per task, one variant per kind (see data/messy.md):

    python benchmarks/messy_generate.py --tasks benchmarks/data/code_apply_dev.jsonl.gz \
        --seed 0 --out benchmarks/data/code_apply_dev_messy.jsonl.gz

Standard library only.  The same tasks and seed give byte-identical output: every variant
draws from its own ``random.Random("<seed>/<task id>/<kind>")``.
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import io
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import IO

KINDS: tuple[str, ...] = (
    "reworded",
    "no_ends",
    "trimmed",
    "widened",
    "reworded_trimmed",
    "whole_function",
    "crlf_tabs",
)
CANONICAL_MARKER = "... existing code ..."

HASH_LANGUAGES = {"python", "ruby", "shell", "bash", "sh", "zsh", "perl", "r", "yaml", "toml"}
SLASH_LANGUAGES = set(
    "javascript typescript jsx tsx go rust java c cpp c++ csharp c# kotlin swift scala php dart".split()
)

# Marker wordings chat models use, by where the marker stands (see data/messy.md, "reworded").
ANY_BODIES: tuple[str, ...] = (
    "...",
    "\u2026",
    "existing code",
    "unchanged",
    "(unchanged)",
    "[unchanged code]",
    "... (keep existing implementation)",
    "... unchanged code ...",
    "... same as before ...",
    "... keep as is ...",
    "... other code ...",
)
LEAD_BODIES: tuple[str, ...] = ("... previous code ...", "... code above unchanged ...")
TRAIL_BODIES: tuple[str, ...] = (
    "... rest of the code unchanged ...",
    "rest of the file stays the same",
    "... remaining code ...",
    "... rest of file ...",
)
MID_BODIES: tuple[str, ...] = ("... rest of the code unchanged ...", "... more code ...")
ALL_BODIES: tuple[str, ...] = ANY_BODIES + LEAD_BODIES + TRAIL_BODIES + MID_BODIES

ANCHOR_RE = re.compile(r"[A-Za-z0-9_]")
WHITESPACE_TAILS: tuple[str, ...] = (" ", "  ", "\t", " \t", "    ")


@dataclass(frozen=True)
class Hunk:
    """Lines ``start:end`` of the expected file; the edit itself spans ``lo:hi`` inside them."""

    start: int
    end: int
    lo: int
    hi: int


@dataclass(frozen=True)
class Snippet:
    """A lazy snippet: hunks of ``expected`` (sorted, disjoint, not touching) and marker flags."""

    hunks: tuple[Hunk, ...]
    lead: bool = True  # write a marker before the first hunk when it does not start the file
    trail: bool = True  # write a marker after the last hunk when it does not end the file


@dataclass(frozen=True)
class Task:
    record: dict
    comment: str  # "#" or "//"
    block: bool  # C-family: /* ... */ markers are also written
    original: list[str]
    expected: list[str]
    edits: tuple[Edit, ...]
    changed: frozenset[int]  # expected lines that are not unchanged lines of original
    canonical: Snippet


# --------------------------------------------------------------------------- parsing


def comment_syntax(language: str, update: str) -> str:
    """The line-comment prefix of a language; unknown languages are read off the markers."""
    lang = language.lower()
    if lang in HASH_LANGUAGES:
        return "#"
    if lang in SLASH_LANGUAGES:
        return "//"
    for line in update.splitlines():
        if line.strip().endswith(CANONICAL_MARKER):
            return line.strip()[: -len(CANONICAL_MARKER)].strip() or "#"
    raise ValueError(f"no comment syntax known for language {language!r}")


def is_marker(line: str, language: str) -> bool:
    """True when ``line`` is a marker this script can write (canonical or reworded)."""
    text = line.strip()
    comment = comment_syntax(language, "")
    bodies = ALL_BODIES + (CANONICAL_MARKER,)
    if any(text == f"{comment} {body}" for body in bodies):
        return True
    if comment == "//" and any(text == f"/* {body} */" for body in bodies):
        return True
    return comment == "#" and language.lower() == "python" and text == "..."


Edit = tuple[int, int, int, int]  # original[i1:i2] became expected[j1:j2]


def line_edits(original: list[str], expected: list[str]) -> list[Edit]:
    """The non-equal blocks of a line diff (``j1 == j2``: lines deleted before ``j1``)."""
    matcher = difflib.SequenceMatcher(None, original, expected, autojunk=False)
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def split_canonical(update: list[str], comment: str) -> tuple[list[list[str]], bool, bool]:
    """The runs of code lines of a canonical snippet, and whether it opens/closes with a marker."""
    marker = f"{comment} {CANONICAL_MARKER}"
    runs: list[list[str]] = [[]]
    for line in update:
        if line.strip() == marker:
            runs.append([])
        else:
            runs[-1].append(line)
    lead = bool(update) and update[0].strip() == marker
    trail = bool(update) and update[-1].strip() == marker
    return [run for run in runs if run], lead, trail


def locate_runs(runs: list[list[str]], expected: list[str]) -> list[tuple[int, int]] | None:
    """Place each run, in order, at its first occurrence in ``expected`` after the previous one."""
    places: list[tuple[int, int]] = []
    pos = 0
    for run in runs:
        for start in range(pos, len(expected) - len(run) + 1):
            if expected[start : start + len(run)] == run:
                places.append((start, start + len(run)))
                pos = start + len(run)
                break
        else:
            return None
    return places


def attach_edits(
    places: list[tuple[int, int]], spans: list[tuple[int, int]], n: int
) -> tuple[Hunk, ...] | None:
    """Give every diff span to the hunk holding it; None when one falls outside every hunk."""
    found: dict[int, list[tuple[int, int]]] = {}
    for j1, j2 in spans:
        for k, (start, end) in enumerate(places):
            if j1 == j2:  # a deletion needs a shown line on each side, unless at a file end
                inside = (start < j1 < end) or (j1 == start == 0) or (j1 == end == n)
            else:
                inside = start <= j1 and j2 <= end
            if inside:
                found.setdefault(k, []).append((j1, j2))
                break
        else:
            return None
    hunks = []
    for k, (start, end) in enumerate(places):
        mine = found.get(k)
        if not mine:
            return None
        hunks.append(Hunk(start, end, min(j1 for j1, _ in mine), max(j2 for _, j2 in mine)))
    return tuple(hunks)


def parse_task(record: dict) -> Task | None:
    """A task with its canonical snippet parsed into hunks; None when the parse is not clean."""
    comment = comment_syntax(record["language"], record["update"])
    original = record["original"].splitlines()
    expected = record["expected"].splitlines()
    runs, lead, trail = split_canonical(record["update"].splitlines(), comment)
    places = locate_runs(runs, expected)
    if places is None:
        return None
    edits = line_edits(original, expected)
    hunks = attach_edits(places, [(j1, j2) for _, _, j1, j2 in edits], len(expected))
    if hunks is None:
        return None
    changed = frozenset(j for _, _, j1, j2 in edits for j in range(j1, j2))
    snippet = Snippet(hunks, lead, trail)
    block = comment == "//"
    task = Task(record, comment, block, original, expected, tuple(edits), changed, snippet)
    if render(task, task.canonical) != record["update"]:
        return None  # the model does not reproduce the canonical text: leave the task alone
    return task


# --------------------------------------------------------------------------- rendering


def indentation(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def marker_indent(lines: list[str]) -> str:
    """Canonical marker indentation: the smallest indentation among the omitted code lines."""
    indents = [indentation(line) for line in lines if line.strip()]
    return min(indents, key=len) if indents else ""


MarkerWriter = Callable[[str, str], str]  # (indent, position: lead|mid|trail) -> marker line


def canonical_marker(comment: str) -> MarkerWriter:
    return lambda indent, _position: f"{indent}{comment} {CANONICAL_MARKER}"


def render(task: Task, snippet: Snippet, write: MarkerWriter | None = None) -> str:
    """The snippet's text: hunk lines of ``expected`` with a marker for each omitted run."""
    write = write or canonical_marker(task.comment)
    lines: list[str] = []
    expected = task.expected
    pos = 0
    for k, hunk in enumerate(snippet.hunks):
        if hunk.start > pos and (k > 0 or snippet.lead):
            position = "lead" if k == 0 else "mid"
            lines.append(write(marker_indent(expected[pos : hunk.start]), position))
        lines.extend(expected[hunk.start : hunk.end])
        pos = hunk.end
    if pos < len(expected) and snippet.trail:
        lines.append(write(marker_indent(expected[pos:]), "trail"))
    return "".join(line + "\n" for line in lines)


def merge_hunks(hunks: Iterable[Hunk]) -> tuple[Hunk, ...]:
    """Sort hunks and join those that overlap or touch (no omitted line between them)."""
    merged: list[Hunk] = []
    for hunk in sorted(hunks, key=lambda h: (h.start, h.end)):
        if merged and hunk.start <= merged[-1].end:
            last = merged[-1]
            merged[-1] = Hunk(
                last.start, max(last.end, hunk.end), min(last.lo, hunk.lo), max(last.hi, hunk.hi)
            )
        else:
            merged.append(hunk)
    return tuple(merged)


# --------------------------------------------------------------------------- kinds


def reword_writer(task: Task, rng: random.Random) -> MarkerWriter:
    """Per marker: a wording for its position, line or block comment, indentation kept or not."""
    bare_ok = task.record["language"].lower() == "python" and not any(
        line.strip() == "..." for line in task.original
    )

    def write(indent: str, position: str) -> str:
        extra = {"lead": LEAD_BODIES, "trail": TRAIL_BODIES}.get(position, MID_BODIES)
        choices = [f"{task.comment} {body}" for body in ANY_BODIES + extra]
        if task.block:
            choices += [f"/* {body} */" for body in ("...", "unchanged", CANONICAL_MARKER)]
        if bare_ok:
            choices.append("...")
        text = rng.choice(choices)
        return (indent if rng.random() < 0.5 else "") + text

    return write


def kind_reworded(task: Task, rng: random.Random) -> str | None:
    return render(task, task.canonical, reword_writer(task, rng))


def kind_no_ends(task: Task, rng: random.Random) -> str | None:
    """Drop the leading marker, the trailing one, or both (as far as the canonical has them)."""
    snippet = task.canonical
    ends = []
    if snippet.lead and snippet.hunks[0].start > 0:
        ends.append("lead")
    if snippet.trail and snippet.hunks[-1].end < len(task.expected):
        ends.append("trail")
    if not ends:
        return None
    options = [ends] + ([[end] for end in ends] if len(ends) == 2 else [])
    drop = set(rng.choice(options))
    return render(task, replace(snippet, lead="lead" not in drop, trail="trail" not in drop))


def trim_side(lines: list[str], rng: random.Random) -> int | None:
    """How many of ``lines`` (context, nearest the edit first) to keep; None: keep them all.

    The kept lines must include an anchor: a line with a letter, digit or underscore.
    """
    need = next((k + 1 for k, line in enumerate(lines) if ANCHOR_RE.search(line)), None)
    if need is None or need >= len(lines):
        return None
    return rng.randint(need, len(lines) - 1)


def trim(task: Task, rng: random.Random) -> Snippet | None:
    """Cut unchanged context on each side of each hunk that borders a marker."""
    hunks = []
    trimmed = False
    for hunk in task.canonical.hunks:
        start, end = hunk.start, hunk.end
        if hunk.start > 0 and rng.random() < 0.75:
            keep = trim_side(task.expected[hunk.start : hunk.lo][::-1], rng)
            if keep is not None:
                start, trimmed = hunk.lo - keep, True
        if hunk.end < len(task.expected) and rng.random() < 0.75:
            keep = trim_side(task.expected[hunk.hi : hunk.end], rng)
            if keep is not None:
                end, trimmed = hunk.hi + keep, True
        hunks.append(Hunk(start, end, hunk.lo, hunk.hi))
    if not trimmed:  # the dice kept every side (or none can be cut)
        return None
    return replace(task.canonical, hunks=tuple(hunks))


def kind_trimmed(task: Task, rng: random.Random) -> str | None:
    snippet = trim_until_cut(task, rng)
    return None if snippet is None else render(task, snippet)


def trim_until_cut(task: Task, rng: random.Random) -> Snippet | None:
    """``trim`` until some side is cut (at most 20 draws); None when no side can be cut."""
    for _ in range(20):
        snippet = trim(task, rng)
        if snippet is not None:
            return snippet
    return None


def kind_widened(task: Task, rng: random.Random) -> str | None:
    """Show 2-6 more unchanged lines of ``expected`` on each side of each hunk."""
    n = len(task.expected)
    hunks = [
        Hunk(max(0, h.start - rng.randint(2, 6)), min(n, h.end + rng.randint(2, 6)), h.lo, h.hi)
        for h in task.canonical.hunks
    ]
    snippet = replace(task.canonical, hunks=merge_hunks(hunks))
    if snippet.hunks[0].start == 0 and snippet.hunks[-1].end == n and len(snippet.hunks) == 1:
        return None  # no marker left: a whole-file answer, not a lazy snippet
    return render(task, snippet)


def kind_reworded_trimmed(task: Task, rng: random.Random) -> str | None:
    snippet = trim_until_cut(task, rng)
    return None if snippet is None else render(task, snippet, reword_writer(task, rng))


def kind_whole_function(task: Task, rng: random.Random) -> str | None:
    """Hunks inside a function become that whole function; other hunks stay as they are."""
    functions = find_functions(task.expected, task.record["language"])
    before = find_functions(task.original, task.record["language"])
    if functions is None or before is None:
        return None
    heads_before = {function.head for function in before}
    heads_after = {function.head for function in functions}
    hunks = []
    replaced = False
    for hunk in task.canonical.hunks:
        found = enclosing_function(functions, hunk, task.changed)
        mine = [edit for edit in task.edits if hunk.lo <= edit[2] and edit[3] <= hunk.hi]
        if any(
            heads_before.intersection(range(i1, i2)) or heads_after.intersection(range(j1, j2))
            for i1, i2, j1, j2 in mine
        ):
            found = None  # the edit adds or removes a function: it is not inside one
        if found is None:
            hunks.append(hunk)
            continue
        if found == "unclear":
            return None
        hunks.append(Hunk(found.start, found.end + 1, hunk.lo, hunk.hi))
        replaced = True
    if not replaced:
        return None
    return render(task, replace(task.canonical, hunks=merge_hunks(hunks)))


def kind_crlf_tabs(task: Task, rng: random.Random) -> str | None:
    """CRLF on every line or on a random half, trailing blanks on a few lines (or none)."""
    lines = task.record["update"].split("\n")[:-1]
    every = rng.random() < 0.5
    crlf = [every or rng.random() < 0.5 for _ in lines]
    if not any(crlf):
        crlf[rng.randrange(len(lines))] = True
    tails = [""] * len(lines)
    if rng.random() < 0.7:
        for k in rng.sample(range(len(lines)), max(1, len(lines) // 5)):
            tails[k] = rng.choice(WHITESPACE_TAILS)
    ends = ["\r\n" if cr else "\n" for cr in crlf]
    return "".join(line + tail + end for line, tail, end in zip(lines, tails, ends, strict=True))


# --------------------------------------------------------------------------- functions


@dataclass(frozen=True)
class Function:
    start: int  # first line (decorators included)
    head: int  # the def / func / signature line
    end: int  # last line, inclusive
    clear: bool  # False when the boundaries are a guess (brace language, odd closing line)


def code_only(lines: list[str], language: str) -> list[str]:
    """Each line with comments dropped and string contents blanked (strings may span lines)."""
    python = language.lower() == "python"
    quotes = ("'''", '"""', "'", '"') if python else ("`", "'", '"')
    out: list[str] = []
    state: str | None = None  # the open string delimiter or "/*" carried over from a line
    for line in lines:
        text, k = [], 0
        while k < len(line):
            if state is not None:
                close = "*/" if state == "/*" else state
                if line.startswith("\\", k) and state != "/*":
                    k += 2
                elif line.startswith(close, k):
                    k, state = k + len(close), None
                    text.append(" " if close == "*/" else close)
                else:
                    k += 1
                continue
            if line.startswith("#" if python else "//", k):
                break
            if not python and line.startswith("/*", k):
                state, k = "/*", k + 2
                continue
            opener = next((q for q in quotes if line.startswith(q, k)), None)
            if opener:
                state, k = opener, k + len(opener)
                text.append(opener)
                continue
            text.append(line[k])
            k += 1
        if state in ("'", '"'):  # an unclosed one-line string ends with its line
            state = None
        out.append("".join(text))
    return out


def find_functions(lines: list[str], language: str) -> list[Function] | None:
    code = code_only(lines, language)
    if language.lower() == "python":
        return python_functions(lines, code)
    if language.lower() in SLASH_LANGUAGES:
        return brace_functions(lines, code)
    return None


PY_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+\w+")


def python_logical_lines(code: list[str], lines: list[str]) -> list[tuple[int, int]]:
    """``(first, last)`` physical lines of each logical Python line (brackets, strings, ``\\``)."""
    logical: list[tuple[int, int]] = []
    depth, first, quote = 0, None, None
    for k, text in enumerate(code):
        if first is None:
            if not lines[k].strip():
                continue
            first = k
        for q in ('"""', "'''"):
            if text.count(q) % 2:
                quote = None if quote == q else (quote or q)
        opened = sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
        depth = max(0, depth + opened)
        if depth == 0 and quote is None and not lines[k].rstrip().endswith("\\"):
            logical.append((first, k))
            first = None
    if first is not None:
        logical.append((first, len(code) - 1))
    return logical


def python_functions(lines: list[str], code: list[str]) -> list[Function]:
    """Every ``def``: decorators above it, body = the following logical lines indented deeper."""
    logical = python_logical_lines(code, lines)
    functions = []
    for k, (first, last) in enumerate(logical):
        match = PY_DEF.match(lines[first])
        if not match:
            continue
        indent = len(match.group(1))
        end = last
        for body_first, body_last in logical[k + 1 :]:
            if not "".join(code[body_first : body_last + 1]).strip():
                continue  # a comment line does not end a body (nor extend it)
            if len(indentation(lines[body_first])) <= indent:
                break
            end = body_last
        start = first
        for dec_first, dec_last in reversed(logical[:k]):
            if dec_last != start - 1 or not lines[dec_first].strip().startswith("@"):
                break
            if len(indentation(lines[dec_first])) != indent:
                break
            start = dec_first
        functions.append(Function(start, first, end, True))
    return functions


BRACE_HEADS: tuple[re.Pattern[str], ...] = (
    re.compile(r"^\s*func\b"),  # Go: functions and methods
    re.compile(r"\bfunc\s*\("),  # Go: function literals
    re.compile(r"\bfunction\b"),  # JS / TS, declarations and callbacks
    re.compile(r"=>\s*\{\s*$"),  # arrow function with a block body
    re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+\w+"),  # Rust
    re.compile(  # a method signature: [modifiers] name[<T>](args)[: type] {
        r"^\s*(?:(?:public|private|protected|static|async|export|default|override|readonly"
        r"|abstract|final|get|set)\s+)*(?!(?:if|for|while|switch|catch|with|return|else|do"
        r"|function|new|typeof|await)\b)[A-Za-z_$][\w$]*\s*(?:<[^>]*>)?\s*\([^;]*\)"
        r"\s*(?::\s*[^={;]+)?\s*\{\s*$"
    ),
)


def brace_functions(lines: list[str], code: list[str]) -> list[Function]:
    """Function heads and the line where their ``{`` closes again (curly depth back to start)."""
    depth_before: list[int] = []
    depth = 0
    for text in code:
        depth_before.append(depth)
        depth += text.count("{") - text.count("}")
    depth_before.append(depth)
    functions = []
    for head, text in enumerate(code):
        if not any(pattern.search(text) for pattern in BRACE_HEADS):
            continue
        base = depth_before[head]
        opened = next(
            (k for k in range(head, min(head + 8, len(code))) if depth_before[k + 1] > base), None
        )
        if opened is None:
            continue
        end = next((k for k in range(opened + 1, len(code)) if depth_before[k + 1] <= base), None)
        if end is None:
            continue
        clear = lines[end].strip().startswith("}") and indentation(lines[end]) == indentation(
            lines[head]
        )
        functions.append(Function(head, head, end, clear))
    return functions


def enclosing_function(
    functions: list[Function], hunk: Hunk, changed: frozenset[int]
) -> Function | str | None:
    """The innermost function holding the hunk's whole edit and whose head line (``def``,
    ``func``, signature) is unchanged, so it existed before; ``"unclear"`` when that function's
    boundaries are a guess; None when no function holds the edit."""
    best: Function | None = None
    for function in functions:
        if function.head in changed:
            continue
        if hunk.lo == hunk.hi:  # a deletion: removed lines sat before line ``lo``
            inside = function.start < hunk.lo <= function.end
        else:
            inside = function.start <= hunk.lo and hunk.hi - 1 <= function.end
        if inside and (best is None or function.end - function.start < best.end - best.start):
            best = function
    if best is None:
        return None
    return best if best.clear else "unclear"


# --------------------------------------------------------------------------- driver

KIND_FUNCTIONS: dict[str, Callable[[Task, random.Random], str | None]] = {
    "reworded": kind_reworded,
    "no_ends": kind_no_ends,
    "trimmed": kind_trimmed,
    "widened": kind_widened,
    "reworded_trimmed": kind_reworded_trimmed,
    "whole_function": kind_whole_function,
    "crlf_tabs": kind_crlf_tabs,
}


def variants(
    record: dict, seed: int, kinds: Iterable[str] = KINDS
) -> Iterable[tuple[str, dict | None]]:
    """``(kind, variant record or None when skipped)`` for each kind, in order."""
    task = parse_task(record)
    for kind in kinds:
        if task is None:
            yield kind, None
            continue
        rng = random.Random(f"{seed}/{record['id']}/{kind}")
        update = KIND_FUNCTIONS[kind](task, rng)
        if update is None or update == record["update"]:
            yield kind, None
            continue
        out = {key: value for key, value in record.items()}
        out["id"] = f"{record['id']}~{kind}"
        out["update"] = update
        out["kind"] = kind
        out["variant_of"] = record["id"]
        yield kind, out


def generate(
    records: Iterable[dict], seed: int, kinds: Iterable[str] = KINDS
) -> tuple[list[dict], Counter, Counter]:
    """All variants of all records, in input order, and per-kind counts (emitted, skipped)."""
    kinds = tuple(kinds)
    emitted: Counter = Counter()
    skipped: Counter = Counter()
    out: list[dict] = []
    for record in records:
        for kind, variant in variants(record, seed, kinds):
            if variant is None:
                skipped[kind] += 1
            else:
                emitted[kind] += 1
                out.append(variant)
    return out, emitted, skipped


def _open(path: str, mode: str) -> IO[str]:
    """A task file, gzipped when its name ends in `.gz` (how the large sets are stored)."""
    if path.endswith(".gz"):  # mtime 0: the same variants give the same bytes
        raw = gzip.GzipFile(path, mode[0] + "b", mtime=0)
        return io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
    return open(path, mode, encoding="utf-8", newline="\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", required=True, help="canonical tasks (.jsonl or .jsonl.gz)")
    parser.add_argument(
        "--out", required=True, help="where to write the variants (.jsonl or .jsonl.gz)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset")
    args = parser.parse_args(argv)
    kinds = [kind for kind in args.kinds.split(",") if kind]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        parser.error(f"unknown kinds: {', '.join(unknown)}")
    with _open(args.tasks, "rt") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    out, emitted, skipped = generate(records, args.seed, kinds)
    with _open(args.out, "wt") as handle:
        for variant in out:
            handle.write(json.dumps(variant) + "\n")
    print(f"{len(records)} tasks -> {len(out)} variants in {args.out}")
    for kind in kinds:
        print(f"  {kind:<17} {emitted[kind]:>3} written, {skipped[kind]:>3} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())

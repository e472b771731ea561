"""Verdicts: the structural merge as an apply result, and a check of a model's answer.

A model's merged file is checked against what the snippet and the merge say: every non-marker
line of the snippet present in order, every change the answer makes one that the snippet shows
or that lies in a hunk the merge placed exactly (`shown`), the file parses where a grammar
exists and the original parsed, and where the merge placed every hunk for sure, the answer is
that file (a line moved, doubled or dropped inside the rules above is still a wrong file). An
answer that fails any check is reported as suspect, never presented as sure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from edge_spec.apply.check.ends import ends_twice
from edge_spec.apply.check.gaps import marker_gaps
from edge_spec.apply.check.shown import unshown_changes
from edge_spec.apply.check.together import runs_apart
from edge_spec.apply.check.twins import kept_beside
from edge_spec.apply.merge import MergeResult, structural_merge
from edge_spec.apply.merge.markers import marker_shape
from edge_spec.apply.merge.syntax import (
    definitions,
    doubled_definition,
    dropped_definition,
    error_line,
    parse,
)
from edge_spec.apply.plan import ApplyResult
from edge_spec.core.stats import Stats
from edge_spec.errors import UserError

MAX_PROBLEMS = 8


def verdicts(merge: MergeResult) -> list[dict[str, Any]]:
    """JSON-ready verdicts, one per hunk."""
    return [asdict(h) for h in merge.hunks]


def merge_of(original: str, update: str, lang: str = "", path: str | None = None) -> MergeResult:
    """The structural merge of `update` into `original` (never raises on odd snippets)."""
    return structural_merge(original, update, lang, path)


def merged_result(merge: MergeResult) -> ApplyResult:
    """An apply answered by the structural merge alone: no model ran."""
    stats = Stats(draft="none", finish_reason="stop")  # complete; `engine` says who wrote it
    return ApplyResult(
        text=merge.text,
        raw=merge.text,
        stats=stats,
        template="",
        engine="merge",
        verdicts=verdicts(merge),
        language=merge.language,
    )


def not_exact_error(merge: MergeResult) -> UserError:
    """--engine merge with a hunk the merge is not sure of: name it and say what to do."""
    if not merge.hunks:
        return UserError("the snippet has no code to merge: pass an edit snippet")
    h = next(h for h in merge.hunks if h.status != "exact")
    a, b = h.snippet_span
    return UserError(
        f"hunk {h.index + 1} (snippet lines {a}-{b}) is {h.status}: {h.reason}; "
        "use --engine auto or model to let the model write the file"
    )


def answer_problems(
    original: str, update: str, answer: str, merge: MergeResult | None
) -> list[str]:
    """What is wrong with a model's merged file, as one-line findings (empty: looks right).

    An answer equal to the merge's unsure text is not suspect for that alone: the model wrote
    the whole file from the original and the snippet, free to place each hunk anywhere, and the
    merge's text only drafted for it (decoding is lossless). Where a model rewrote only a
    window that cannot hold every placement the check allows, `apply.region` says so."""
    ans = answer.replace("\r\n", "\n").splitlines()
    if merge is None:
        return snippet_lines_missing(update.replace("\r\n", "\n").splitlines(), ans)
    problems = unplaced_changes(original, update, answer, merge)
    problems += _parse_problems(original, answer, merge.language)
    if _trimmed(ans) == _trimmed(original.replace("\r\n", "\n").splitlines()):
        problems.append("the answer leaves the file as it was: the edit is not applied")
    if merge.exact:
        problems += _off_the_sure_merge(ans, merge.text.replace("\r\n", "\n").splitlines())
    return problems[:MAX_PROBLEMS]


def answer_doubts(original: str, update: str, answer: str, language: str) -> list[str]:
    """What a model's file does that the snippet allows but does not say, as warnings for a
    file written all the same: a definition of the original gone (deleted, or replaced by the
    snippet's code under another name) although the snippet never names it. Where a hunk's
    context is a line such as `}`, reading it before or after a whole definition tells an
    insertion from a rename, and no check can say which was meant."""
    if not language:
        return []
    before = parse(language, original.encode("utf-8"))
    after = parse(language, answer.encode("utf-8"))
    if before is None or after is None:
        return []
    gone = dropped_definition(definitions(language, before), definitions(language, after), update)
    if gone is None:
        return []
    return [
        f"the file no longer has {gone.kind} {gone.name} (original lines {gone.start + 1}-"
        f"{gone.end + 1}), which the snippet does not name: check that the edit removes or "
        "renames it"
    ]


def unplaced_changes(original: str, update: str, answer: str, merge: MergeResult) -> list[str]:
    """The line-level findings: snippet lines left out, changes the snippet does not show,
    code under a marker not kept, old and new versions of a line side by side, the file's
    first or last line written twice."""
    ans = answer.replace("\r\n", "\n").splitlines()
    return [
        *snippet_lines_missing(update.replace("\r\n", "\n").splitlines(), ans),
        *unshown_changes(original, update, answer, merge),
        *marker_gaps(original, update, answer, merge.language),
        *kept_beside(original, update, answer, merge.language),
        *runs_apart(original, update, answer, merge.language),
        *ends_twice(original, update, answer, merge.language),
    ]


def unsure_guess(what: str, merge: MergeResult, hunks: Sequence[int]) -> str:
    """The finding for an answer that repeats the merge where the merge is unsure, written where
    the model could not have placed the hunk otherwise (a window short of a placement the
    check allows): it confirmed nothing."""
    doubts = [merge.hunks[i] for i in hunks if merge.hunks[i].status != "exact"]
    first = doubts[0] if doubts else merge.hunks[0]
    return (
        f"{what} is the structural merge's own guess, which is not sure of hunk "
        f"{first.index + 1} ({first.reason})"
    )


def _off_the_sure_merge(answer: Sequence[str], merged: Sequence[str]) -> list[str]:
    """Where the answer parts from a merge sure of every hunk (trailing blanks aside)."""
    a, m = _trimmed(answer), _trimmed(merged)
    if a == m:
        return []
    at = next(
        (i for i, (x, y) in enumerate(zip(a, m, strict=False)) if x != y), min(len(a), len(m))
    )
    got = a[at].strip()[:60] if at < len(a) else "the end of the file"
    return [
        f"the answer parts from the structural merge, which placed every hunk for sure, at "
        f"line {at + 1}: {got!r}"
    ]


def _trimmed(lines: Sequence[str]) -> list[str]:
    out = [ln.rstrip() for ln in lines]
    if out:  # a byte order mark is the file's encoding, not its text
        out[0] = out[0].lstrip("\ufeff")
    while out and not out[-1]:
        out.pop()
    return out


def snippet_lines_missing(snippet: Sequence[str], answer: Sequence[str]) -> list[str]:
    """Non-marker snippet lines that do not appear in the answer, in order."""
    at, out = 0, []
    stripped = [ln.strip() for ln in answer]
    for i, line in enumerate(snippet, 1):
        text = line.strip()
        if not text or marker_shape(line):
            continue
        try:
            at = stripped.index(text, at) + 1
        except ValueError:
            out.append(f"snippet line {i} is not in the answer (in order): {text[:60]!r}")
    return out


def _parse_problems(original: str, answer: str, language: str) -> list[str]:
    if not language:
        return []
    before = parse(language, original.encode("utf-8"))
    if before is None or error_line(before) is not None:
        return []  # no grammar, or the original does not parse either
    tree = parse(language, answer.encode("utf-8"))
    line = error_line(tree)
    if line is not None:
        return [f"the answer does not parse as {language} (line {line + 1})"]
    # Code moved with its old copy kept.
    name = doubled_definition(
        definitions(language, before),
        original.replace("\r\n", "\n").split("\n"),
        definitions(language, tree),
        answer.replace("\r\n", "\n").split("\n"),
    )
    return [f"the answer defines {name[0]} {name[1]} times"] if name else []

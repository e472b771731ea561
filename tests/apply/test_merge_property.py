"""Property test of the structural merge: wherever it says `exact`, the merge is the expected file.

Random files (distinct lines, lines repeated on purpose: `}`, `return None`, blank lines, and
repeated statements), random edits (replace, insert, delete, modify a line in place), rendered as
lazy snippets in several styles: marker wordings, with or without end markers, 0 to 4 context
lines per side, CRLF, trailing whitespace, tabs for spaces. A snippet is only generated when it
states the edit: lines an edit deletes are never next to a marker (a marker says "unchanged
here"), except a modification in place of a line by one with the same key, which is what snippets
with trimmed context look like.

`python tests/apply/test_merge_property.py [N]` prints the recall (fraction exact) per style.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from edge_spec.apply.merge import structural_merge

MARKERS = [
    "# ... existing code ...",
    "// ...",
    "# ...",
    "…",
    "// ... rest of the code unchanged ...",
    "# rest of the file stays the same",
    "/* unchanged */",
    "// existing code",
    "// ... (keep existing implementation)",
    "# ... previous code ...",
    "// [unchanged code]",
    "{/* ... */}",
    "-- ...",
    "<!-- ... -->",
]
TRIVIAL = ["}", "return None", "", "    pass", "else:", ")", "    }", "    return None"]
BALANCED = [t for t in TRIVIAL if not any(c in t for c in "(){}")]
INDENTS = ["", "    ", "        "]


@dataclass
class Case:
    original: str
    snippet: str
    expected: str
    style: str


def _line(rng: random.Random, used: set[int]) -> str:
    if rng.random() < 0.3:
        return rng.choice(TRIVIAL)
    k = rng.randrange(40) if rng.random() < 0.2 else rng.randrange(10**6)
    used.add(k)
    return f"{rng.choice(INDENTS)}value_{k} = compute_{k % 7}(alpha, beta_{k})"


def _edits(rng: random.Random, n: int) -> list[tuple[int, int, list[str], str]]:
    """Non-overlapping (start, end, new lines, kind) inside the file, ordered."""
    points = sorted(rng.sample(range(1, n - 1), min(n - 2, rng.randint(1, 3) * 2)))
    out = []
    for a, b in zip(points[::2], points[1::2], strict=False):
        kind = rng.choice(["replace", "insert", "delete", "modify"])
        b = min(b, a + rng.randint(1, 4))
        # new code keeps brackets balanced, as real edits do (both files parse)
        new = [
            f"{rng.choice(INDENTS)}fresh_{rng.randrange(10**6)}(x)"
            if rng.random() > 0.15
            else rng.choice(BALANCED)
            for _ in range(rng.randint(1, 4))
        ]
        if kind == "insert":
            b = a
            if not any(t.strip() for t in new):  # blank lines alone have no place to go
                new.append(f"fresh_{rng.randrange(10**6)}(x)")
        elif kind == "delete":
            new = []
        elif kind == "modify":
            b = a + 1
            new = ["<modify>"]
        out.append((a, b, new, kind))
    return out


def _slides(olines: list[str], a: int, b: int, new: list[str]) -> bool:
    """Whether the edit could as well sit one line over (equal lines at its ends): no snippet
    can say which, so such edits are not generated."""
    if b > a and (olines[a] == olines[b] or olines[b - 1] == olines[a - 1]):
        return True
    return bool(new) and (new[0] == olines[b] or new[-1] == olines[a - 1])


def _faithful(
    olines: list[str], edits: list[tuple[int, int, list[str], str]]
) -> list[tuple[int, int, list[str], str]]:
    out = []
    for a, b, new, kind in edits:
        if kind != "modify" and _slides(olines, a, b, new):
            continue
        out.append((a, b, new, kind))
    return out


def make_case(seed: int) -> Case:
    rng = random.Random(seed)
    used: set[int] = set()
    olines = [_line(rng, used) for _ in range(rng.randint(8, 70))]
    edits = _faithful(olines, _edits(rng, len(olines))) or [(1, 1, ["fresh_line(x)"], "insert")]
    # The new file as a sequence of (original index or None, text).
    seq: list[tuple[int | None, str]] = []
    changed_at: list[tuple[int, int, str]] = []  # positions in seq: [start, end) and kind
    pos = 0
    for a, b, new, kind in edits:
        seq += [(i, olines[i]) for i in range(pos, a)]
        if kind == "modify":
            old = olines[a]
            if "value_" not in old:
                new = [f"{old}  # changed"] if old.strip() else ["fresh_blank()"]
                kind = "replace"
            else:
                new = [old.replace("compute_", "changed_", 1)]
        changed_at.append((len(seq), len(seq) + len(new), kind if b > a else "insert"))
        seq += [(None, t) for t in new]
        pos = b
    seq += [(i, olines[i]) for i in range(pos, len(olines))]
    style = rng.choice(["plain", "no_ends", "trimmed", "crlf", "trailing", "tabs", "widened"])
    snippet = _render(rng, seq, changed_at, style)
    expected_lines = [t for _, t in seq]
    eol = "\r\n" if style == "crlf" and rng.random() < 0.5 else "\n"
    original = eol.join(olines) + eol
    return Case(original, snippet, eol.join(expected_lines) + eol, style)


def _render(
    rng: random.Random,
    seq: list[tuple[int | None, str]],
    changed_at: list[tuple[int, int, str]],
    style: str,
) -> str:
    shown = [idx is None for idx, _ in seq]
    for start, end, kind in changed_at:
        lo_ctx, hi_ctx = (rng.randint(0, 4), rng.randint(0, 4))
        if style == "widened":
            lo_ctx, hi_ctx = rng.randint(4, 12), rng.randint(4, 12)
        if style == "trimmed":
            lo_ctx, hi_ctx = rng.randint(0, 1), rng.randint(0, 1)
        if kind in ("replace", "delete"):  # deleted lines sit between shown lines with identity
            lo_ctx, hi_ctx = max(lo_ctx, 1), max(hi_ctx, 1)
            while start - lo_ctx > 0 and not _identity(seq[start - lo_ctx][1]):
                lo_ctx += 1
            while end + hi_ctx < len(seq) and not _identity(seq[end + hi_ctx - 1][1]):
                hi_ctx += 1
        for k in range(max(0, start - lo_ctx), start):
            shown[k] = True
        for k in range(end, min(len(seq), end + hi_ctx)):
            shown[k] = True
    marker = rng.choice(MARKERS)
    # A context line spaced unlike a new line of the same text ties with it: which copy is the
    # original's cannot be told, so trailing blanks would decide nothing but whitespace.
    new_texts = {t.strip() for idx, t in seq if idx is None}
    out: list[str] = []
    k = 0
    while k < len(seq):
        if shown[k]:
            text = seq[k][1]
            spaced = seq[k][0] is not None and style == "trailing" and rng.random() < 0.5
            if spaced and text.strip() not in new_texts:
                text += "  "
            out.append(text)
            k += 1
            continue
        run_start = k
        while k < len(seq) and not shown[k]:
            k += 1
        at_end = run_start == 0 or k == len(seq)
        if not (at_end and style == "no_ends"):
            indent = seq[run_start][1][: len(seq[run_start][1]) - len(seq[run_start][1].lstrip())]
            out.append(indent + marker)
    if style == "tabs":
        out = [
            "\t" * ((len(ln) - len(ln.lstrip(" "))) // 4) + ln.lstrip(" ")
            if not (len(ln) - len(ln.lstrip(" "))) % 4
            else ln
            for ln in out
        ]
    eol = "\r\n" if style == "crlf" else "\n"
    return eol.join(out) + eol


def _function(rng: random.Random, name: str, indent: str) -> list[str]:
    body = []
    for _ in range(rng.randint(2, 7)):
        r = rng.randrange(1000)
        body += rng.choice(
            [
                [f"x_{r} = compute(a, {r})"],
                [f"if a > {r}:", f"    return {r}"],
                ["for i in range(b):", "    total += i"],
                ["return None"],
                [""],
                [f"log.debug('step {r}')"],
            ]
        )
    while body and not body[-1].strip():
        body.pop()
    head = [f"{indent}@cached"] if rng.random() < 0.2 else []
    return (
        head
        + [f"{indent}def {name}(a, b):"]
        + [f"{indent}    {ln}" if ln else "" for ln in body or ["pass"]]
    )


def make_py_case(seed: int) -> Case:
    """A Python file of functions (and a class), one structural edit, several snippet shapes."""
    rng = random.Random(seed)
    funcs = [_function(rng, f"f_{k}", "") for k in range(rng.randint(3, 8))]
    methods = [_function(rng, f"m_{k}", "    ") for k in range(rng.randint(1, 4))]
    klass = ["class Box:"] + [ln for m in methods for ln in ["", *m]][1:]
    items = funcs[:]
    items.insert(rng.randrange(len(items) + 1), klass)
    # An edit at the file's first or last lines with no marker beyond it reads as "the rest is
    # unchanged" (merge.py, unmarked ends): such deletions cannot be stated, so none is made.
    target = rng.randrange(len(funcs))
    if items.index(funcs[target]) in (0, len(items) - 1):
        items.append(_function(rng, "f_end", ""))
        items.insert(0, _function(rng, "f_top", ""))
    old = funcs[target]
    kind = rng.choice(["body", "rewrite", "new", "delete", "append"])
    new = list(old)
    if kind == "body":
        k = rng.randrange(1, len(old))
        new[k : k + rng.randint(0, 1)] = [f"    changed_{rng.randrange(99)}(a)"]
    elif kind == "rewrite":
        new = new[:1] + [f"    y = rewrite(a, {rng.randrange(99)})", "    return y"]
    elif kind == "append":
        new = new + [f"    tail_{rng.randrange(99)}(b)"]
    after = [ln for it in items for ln in ["", "", *(new if it is old else it)]][2:]
    if kind == "new":
        extra = _function(rng, f"brand_{rng.randrange(99)}", "")
        after = [
            ln
            for it in items
            for ln in (["", "", *it, "", "", *extra] if it is old else ["", "", *it])
        ][2:]
    elif kind == "delete":
        after = [ln for it in items if it is not old for ln in ["", "", *it]][2:]
    before = [ln for it in items for ln in ["", "", *it]][2:]
    style = rng.choice(["diff", "whole", "whole_marked", "inner"])
    snippet = _py_snippet(rng, style, kind, before, after, new, old)
    if snippet is None:
        style = "diff"
        snippet = _diff_snippet(rng, before, after)
    return Case("\n".join(before) + "\n", snippet, "\n".join(after) + "\n", "py_" + style)


def _py_snippet(
    rng: random.Random,
    style: str,
    kind: str,
    before: list[str],
    after: list[str],
    new: list[str],
    old: list[str],
) -> str | None:
    marker = rng.choice(["# ... existing code ...", "# ...", "# rest unchanged"])
    if kind in ("new", "delete") or style == "diff":
        return None
    if style == "whole":
        return "\n".join(new) + "\n"
    if style == "whole_marked":
        return "\n".join([marker, *new, marker]) + "\n"
    first = next(
        (k for k, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
        min(len(old), len(new)),
    )
    if first < 2:
        return None  # the change is at the header: no room for a marker inside the body
    head = next(k for k, ln in enumerate(new) if ln.lstrip().startswith("def "))
    return "\n".join([marker, *new[: head + 1], "    " + marker, *new[first:], marker]) + "\n"


def _diff_snippet(rng: random.Random, before: list[str], after: list[str]) -> str:
    seq: list[tuple[int | None, str]] = []
    changed: list[tuple[int, int, str]] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if op == "equal":
            seq += [(i, before[i]) for i in range(i1, i2)]
        else:
            if j2 > j1 and (
                (i2 < len(before) and after[j1] == before[i2])
                or (i1 > 0 and after[j2 - 1] == before[i1 - 1])
            ):
                return "\n".join(after) + "\n"  # the edit slides: no snippet can say where
            changed.append((len(seq), len(seq) + j2 - j1, "insert" if op == "insert" else op))
            seq += [(None, t) for t in after[j1:j2]]
    return _render(rng, seq, changed, rng.choice(["plain", "no_ends", "trailing"]))


def _identity(line: str) -> bool:
    return (
        bool(line.strip())
        and line not in TRIVIAL
        and line.strip() not in ("return None", "pass", "}")
    )


def check(case: Case) -> bool:
    """Whether the merge was exact; fails when it was exact and wrong."""
    result = structural_merge(case.original, case.snippet)
    if result.exact:
        assert result.text == case.expected, (case.style, case.snippet, result.hunks)
    return result.exact


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32))
@example(3871800274)  # a closing bracket next to a marker that closes the block further on
@example(4013359274)  # a context line that ties with a new line of the same text
def test_exact_merges_are_right(seed: int) -> None:
    check(make_case(seed))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32))
@example(1328632298)  # a diff's part that stops after an insertion, read as a whole body
def test_exact_python_merges_are_right(seed: int) -> None:
    case = make_py_case(seed)
    result = structural_merge(case.original, case.snippet, "python")
    if result.exact:
        assert result.text == case.expected, (case.style, case.snippet, result.hunks)


def recall(n: int = 3000) -> None:
    """Print the fraction of generated snippets the merge is sure about, per style."""
    total: Counter[str] = Counter()
    exact: Counter[str] = Counter()
    for seed in range(n):
        for case, lang in ((make_case(seed), ""), (make_py_case(seed), "python")):
            result = structural_merge(case.original, case.snippet, lang)
            assert not result.exact or result.text == case.expected, (seed, case.style)
            total[case.style] += 1
            exact[case.style] += result.exact
    for style in sorted(total):
        print(
            f"{style:16} {exact[style]:5}/{total[style]:5} exact "
            f"({exact[style] / total[style]:.0%})"
        )
    all_exact, all_total = sum(exact.values()), sum(total.values())
    print(
        f"{'all':16} {all_exact:5}/{all_total:5} exact ({all_exact / all_total:.0%}), "
        "none of them wrong"
    )


if __name__ == "__main__":
    recall(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)

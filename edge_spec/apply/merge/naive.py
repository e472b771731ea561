"""The naive merge: expand each marker of a snippet into the original lines it elides.

A drafting reference (the model decides the output): where the answer follows the snippet, it
predicts the changed lines as well as the copied ones.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from edge_spec.core.types import Reference

MARKER = re.compile(
    r"^\s*(#|//|/\*|<!--|--|;|%)?\s*\.\.\.\s*(existing code|rest of|unchanged)[^\n]*$",
    re.IGNORECASE,
)


def naive_merge(original: str, update: str) -> str:
    """Expand each `... existing code ...` marker of the snippet into the original lines it elides.

    A reference for drafting only (the model decides the output): where the answer follows the
    snippet, this predicts the changed lines as well as the copied ones.
    """
    orig = original.splitlines()
    chunks: list[list[str]] = [[]]
    for line in update.splitlines():
        if MARKER.match(line):
            chunks.append([])
        else:
            chunks[-1].append(line)
    out: list[str] = []
    pos = 0
    for chunk in chunks:
        while chunk and not chunk[-1].strip():
            chunk = chunk[:-1]
        if not any(ln.strip() for ln in chunk):
            continue
        span = _locate(orig, chunk, pos)
        if span is None:
            out.extend(chunk)
            continue
        s, e = span
        out.extend(orig[pos:s])
        out.extend(chunk)
        pos = max(pos, e)
    out.extend(orig[pos:])
    return "\n".join(out) + ("\n" if original.endswith("\n") else "")


def edit_references(
    original: str, update: str, merged: str | None = None
) -> tuple[Reference, Reference]:
    """The merge (`merged`, else the naive merge) and the original, each cut where the merge
    departs from the original."""
    merged = naive_merge(original, update) if merged is None else merged
    a, b = original.splitlines(keepends=True), merged.splitlines(keepends=True)
    off_a = [0]
    for ln in a:
        off_a.append(off_a[-1] + len(ln))
    off_b = [0]
    for ln in b:
        off_b.append(off_b[-1] + len(ln))
    cuts_a: set[int] = set()
    cuts_b: set[int] = set()
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            cuts_a.update((off_a[i1], off_a[i2]))
            cuts_b.update((off_b[j1], off_b[j2]))
    return Reference(merged, tuple(sorted(cuts_b))), Reference(original, tuple(sorted(cuts_a)))


def _locate(orig: list[str], chunk: list[str], pos: int) -> tuple[int, int] | None:
    """The span of original lines [s, e) that `chunk` replaces, anchored on matching lines."""
    lines = [(j, ln.strip()) for j, ln in enumerate(chunk) if ln.strip()]
    distinctive = [(j, ln) for j, ln in lines if len(ln) >= 4] or lines
    first = next(((j, i) for j, ln in distinctive if (i := _find(orig, ln, pos)) is not None), None)
    if first is None:
        j, ln = distinctive[0]
        i = _fuzzy(orig, ln, pos)
        if i is None:
            return None
        first = (j, i)
    j1, i1 = first
    j2, i2 = j1, i1
    window = i1 + 2 * len(chunk) + 20
    for j, ln in reversed(distinctive):
        if j <= j1:
            break
        i = _find(orig, ln, i1 + 1, window)
        if i is not None:
            j2, i2 = j, i
            break
    if j2 == j1 and distinctive[-1][0] > j1:  # no exact end anchor: try a fuzzy one
        j, ln = distinctive[-1]
        i = _fuzzy(orig, ln, i1 + 1, stop=window)
        if i is not None:
            j2, i2 = j, i
    s = max(pos, i1 - j1)
    e = min(len(orig), i2 + 1 + (len(chunk) - 1 - j2))
    return s, max(s, e)


def _find(lines: list[str], target: str, start: int, stop: int | None = None) -> int | None:
    for i in range(start, min(len(lines), stop or len(lines))):
        if lines[i].strip() == target:
            return i
    return None


def _fuzzy(
    lines: list[str], target: str, start: int, cutoff: float = 0.7, stop: int | None = None
) -> int | None:
    best, best_i = cutoff, None
    for i in range(start, min(len(lines), stop or len(lines))):
        sm = SequenceMatcher(None, lines[i].strip(), target)
        if sm.quick_ratio() > best and sm.ratio() > best:
            best, best_i = sm.ratio(), i
    return best_i

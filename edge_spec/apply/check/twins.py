"""Old and new versions of a line side by side: the snippet's replacement written as an insertion.

Next to a marker, "these new lines" may replace the original lines there or come in addition
to them; the snippet does not say. A reader knows from the text: `use Slim\\Interfaces\\Route;`
written beside `use \\Slim\\Interfaces\\Route;` is the same import twice, the old one meant
gone. So an answer is suspect where a snippet line it adds stands within a few lines of an
original line it keeps unchanged, not shown in the snippet, on a side of the added block that
no shown line closes, whose identifying words the new line all repeats (two or more of them)
and whose text it mostly is.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from edge_spec.apply.merge.anchors import LineIndex, identifiers, norm
from edge_spec.apply.merge.markers import classify_markers

_NEAR = 3  # non-blank answer lines each side of an added block where its old version may stand
_ALIKE = 0.75  # the two lines' text similarity (difflib ratio) from which they read as one


def _alike(old: str, new: str) -> bool:
    words = set(identifiers(old))
    if len(words) < 2 or not words <= set(identifiers(new)):
        return False
    return SequenceMatcher(None, old, new, autojunk=False).ratio() >= _ALIKE


def _slid(keys: Sequence[str], j1: int, j2: int, shown: set[str]) -> tuple[int, int]:
    """An inserted block moved along the lines it can slide over (its first line repeated
    after it, or its last before it: a diff puts a block of `)` ... `)` either way) to where
    most of its neighbours are shown lines."""
    lo, hi = j1, j1
    while lo > 0 and keys[lo - 1] == keys[lo - 1 + j2 - j1]:
        lo -= 1
    while hi + j2 - j1 < len(keys) and keys[hi] == keys[hi + j2 - j1]:
        hi += 1

    def closed(a: int) -> int:
        b = a + j2 - j1
        return (a > 0 and keys[a - 1] in shown) + (b < len(keys) and keys[b] in shown)

    best = max(range(lo, hi + 1), key=closed)
    return best, best + j2 - j1


def kept_beside(original: str, snippet: str, answer: str, language: str) -> list[str]:
    """One finding per added snippet line written next to the original line it rewrites."""
    okeys = [k for k in map(norm, original.replace("\r\n", "\n").split("\n")) if k]
    akeys = [k for k in map(norm, answer.replace("\r\n", "\n").split("\n")) if k]
    slines = snippet.replace("\r\n", "\n").split("\n")
    flags = classify_markers(slines, LineIndex(original.split("\n")), language)
    shown = {norm(ln) for ln, mark in zip(slines, flags, strict=True) if not mark and norm(ln)}
    kept: set[int] = set()  # answer positions holding an unchanged original line
    added: list[tuple[int, int]] = []
    sm = SequenceMatcher(None, okeys, akeys, autojunk=False)
    for op, _i1, _i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            kept.update(range(j1, j2))
        elif j2 > j1:
            added.append(_slid(akeys, j1, j2, shown) if op == "insert" else (j1, j2))
    out: list[str] = []
    for j1, j2 in added:
        # Only a side where the snippet's context does not close the block can hide the old
        # version: a shown neighbour there says what comes next.
        sides: list[int] = []
        if j1 > 0 and akeys[j1 - 1] not in shown:
            sides += range(max(0, j1 - _NEAR), j1)
        if j2 < len(akeys) and akeys[j2] not in shown:
            sides += range(j2, min(len(akeys), j2 + _NEAR))
        near = [j for j in sides if j in kept and akeys[j] not in shown]
        for j in range(j1, j2):
            if akeys[j] not in shown:
                continue
            twin = next((q for q in near if _alike(akeys[q], akeys[j])), None)
            if twin is not None:
                out.append(
                    f"answer line {akeys[j][:50]!r} is written beside the original line "
                    f"{akeys[twin][:50]!r} it rewrites: old and new versions both kept"
                )
                return out
    return out

"""Which changes of a model's answer the snippet shows, judged without trusting unsure merges.

A right answer is the original with the snippet's changes made, and nothing else changed. So
every block where the answer differs from the original (a line diff, blank lines and
indentation ignored) must be explained:

- by the snippet itself: the block's new lines stand in the snippet as one run with no marker
  inside, and where the block removes original lines, the answer's neighbours of the block are
  the run's neighbours in the snippet (the snippet shows what comes before and after the change;
  a file edge counts when the snippet starts or ends there unmarked). A pure insertion needs one
  such neighbour, which fixes its place;
- or by a hunk the structural merge placed `exact` (its verdicts are trusted: anchors unique and
  consistent), when the block lies within that hunk's original span and its new lines are
  snippet lines.

A block nothing explains is a change outside the edits the snippet asks for: an omission, a
duplicated or altered line, an edit at the wrong place. The merge's unsure hunks explain
nothing, since their spans may be wrong, which is what made the old check (edited regions taken
from the merge) flag right answers wherever the merge was unsure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from edge_spec.apply.merge import MergeResult
from edge_spec.apply.merge.anchors import LineIndex, norm
from edge_spec.apply.merge.markers import classify_markers

_MARK = "\0marker"  # never equal to a line's text
_EDGE = "\0edge"


def _keyed(lines: Sequence[str]) -> tuple[list[str], list[int]]:
    """Non-blank lines as match keys, with their line numbers."""
    keys, at = [], []
    for i, ln in enumerate(lines):
        k = norm(ln)
        if k:
            keys.append(k)
            at.append(i)
    return keys, at


def _width(line: str) -> int:
    lead = line[: len(line) - len(line.lstrip(" \t"))]
    return len(lead.expandtabs(4))


@dataclass(frozen=True)
class _Snippet:
    """The snippet's non-blank lines as keys (markers as `_MARK`), their snippet line numbers,
    per line the smallest indentation of the hunk (run between markers) it belongs to, and its
    own indentation."""

    keys: list[str]
    lines: list[int]
    floor: list[int]
    widths: list[int]

    @classmethod
    def of(cls, original: Sequence[str], snippet: Sequence[str], language: str) -> _Snippet:
        flags = classify_markers(snippet, LineIndex(original), language)
        keys, lines, widths = [], [], []
        for i, (ln, mark) in enumerate(zip(snippet, flags, strict=True)):
            if mark or norm(ln):
                keys.append(_MARK if mark else norm(ln))
                lines.append(i)
                widths.append(_width(ln))
        floor = list(widths)
        start = 0
        for j in range(len(keys) + 1):
            if j == len(keys) or keys[j] == _MARK:
                low = min(widths[start:j], default=0)
                floor[start:j] = [low] * (j - start)
                start = j + 1
        return cls(keys, lines, floor, widths)


def _side_ok(snip: _Snippet, q: int, ref: int, neighbour: str, width: int) -> bool:
    """Whether snippet position q, beside the run, agrees with the answer's neighbour there:
    the same line, the file edge at the snippet's unmarked edge, or a marker with the neighbour
    at or outside the indentation of the run's hunk (`ref`, a line of it): the run rewrote its
    block to the end, as a whole function given by name does."""
    if not 0 <= q < len(snip.keys):
        return neighbour == _EDGE
    if snip.keys[q] != _MARK:
        return snip.keys[q] == neighbour
    return (
        neighbour != _EDGE
        and 0 <= ref < len(snip.keys)
        and snip.keys[ref] != _MARK
        and width <= snip.floor[ref]
    )


def _head(key: str) -> str:
    """What a line declares or assigns: its text before the first bracket, colon or `=`
    (`def set`, `function render`, `x`), for matching a rewritten block to the one it replaces."""
    return re.split(r"[(\[{:=<]", key, maxsplit=1)[0].strip()


def _shown(
    snip: _Snippet,
    new: Sequence[str],
    left: tuple[str, int],
    right: tuple[str, int],
    gone: Sequence[str],
) -> bool:
    """Whether the block (new lines between the answer's neighbours, replacing the original
    lines `gone`, if any) stands in the snippet."""
    n, seq = len(new), snip.keys
    removed = gone[0] if gone else None
    # A run that opens like the block it replaces (`def set(...)` for `def set(...)`) was
    # given by name: the marker before it says where it starts, whatever ends above it.
    head = _head(new[0]) if n and removed is not None else ""
    by_name = bool(head) and head == _head(removed or "")
    for p in range(len(seq) - n + 1):
        if list(seq[p : p + n]) != list(new):
            continue
        if removed is not None:
            # A marker beside a deletion shows nothing: only a rewritten run may end at one
            # (its block rewritten to the block's end). Where a run starts after a marker,
            # only its name says which block it rewrites: lines above it that it took the
            # place of would be code the marker keeps.
            ref_r = p + n - 1 if n else -1
            left_ok = _side_ok(snip, p - 1, -1, *left) or (
                by_name and p > 0 and seq[p - 1] == _MARK and snip.widths[p] == snip.floor[p]
            )
            if left_ok and _side_ok(snip, p + n, ref_r, *right) and not _kept(snip, p, n, gone):
                return True
        elif (p > 0 and seq[p - 1] == left[0]) or (p + n < len(seq) and seq[p + n] == right[0]):
            return True
        elif (p == 0 and left[0] == _EDGE) or (p + n == len(seq) and right[0] == _EDGE):
            return True  # an unmarked snippet end is the file's end
    return False


def _kept(snip: _Snippet, p: int, n: int, gone: Sequence[str]) -> bool:
    """Whether the snippet reads as well with the removed lines kept: they end with all of the
    context the snippet shows before the run (back to a marker), or begin with all of the
    context after it. Then the snippet's context stands there too (the last lines of a test
    like the one before it) and the removal is the answer's, not the snippet's."""
    seq = snip.keys
    q = p
    while q > 0 and seq[q - 1] != _MARK:
        q -= 1
    r = p + n
    while r < len(seq) and seq[r] != _MARK:
        r += 1
    before, after = seq[q:p], seq[p + n : r]
    fits_before = q > 0 and before and list(gone[-len(before) :]) == before
    fits_after = r < len(seq) and after and list(gone[: len(after)]) == after
    return bool(fits_before or fits_after)


def _doubled(snip: _Snippet, okeys: Sequence[str], i1: int, i2: int, new: Sequence[str]) -> bool:
    """Whether an insertion repeats the original lines right beside it (a closing `}` the
    snippet shows once, written next to the original's own) where the snippet does not show
    them twice in a row."""
    n = len(new)
    if i2 != i1 or not n:
        return False
    if list(okeys[max(0, i1 - n) : i1]) != list(new) and list(okeys[i1 : i1 + n]) != list(new):
        return False
    twice = [*new, *new]
    seq = snip.keys
    return not any(seq[p : p + 2 * n] == twice for p in range(len(seq) - 2 * n + 1))


def _broken_pairs(snip: _Snippet, akeys: Sequence[str]) -> list[str]:
    """Snippet lines shown next to each other (no marker between) that the answer separates."""
    pairs = set(zip(akeys, akeys[1:], strict=False))
    out = []
    for j in range(len(snip.keys) - 1):
        a, b = snip.keys[j], snip.keys[j + 1]
        if _MARK not in (a, b) and (a, b) not in pairs:
            out.append(
                f"snippet lines {snip.lines[j] + 1} and {snip.lines[j + 1] + 1} are next "
                "to each other in the snippet but not in the answer"
            )
    return out


def _in_exact_hunk(merge: MergeResult, a: int, b: int) -> bool:
    """Whether original lines [a, b) (an insertion point when a == b) lie in an exact hunk's
    span, with a line of slack each side for blank lines and closing brackets."""
    for h in merge.hunks:
        if h.status != "exact" or h.original_span is None:
            continue
        s, e = h.original_span
        if s - 1 <= a and b <= e + 1:
            return True
    return False


def unshown_changes(original: str, snippet: str, answer: str, merge: MergeResult) -> list[str]:
    """One finding per block of the answer's changes that neither the snippet nor an exact
    hunk of the merge explains, and per pair of snippet lines the answer pulls apart."""
    olines = original.replace("\r\n", "\n").split("\n")
    alines = answer.replace("\r\n", "\n").split("\n")
    snip = _Snippet.of(olines, snippet.replace("\r\n", "\n").split("\n"), merge.language)
    okeys, oat = _keyed(olines)
    akeys, aat = _keyed(alines)
    plain = {k for k in snip.keys if k != _MARK}
    out = []
    sm = SequenceMatcher(None, okeys, akeys, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        new = akeys[j1:j2]
        left = (akeys[j1 - 1], _width(alines[aat[j1 - 1]])) if j1 > 0 else (_EDGE, 0)
        right = (akeys[j2], _width(alines[aat[j2]])) if j2 < len(akeys) else (_EDGE, 0)
        if _shown(snip, new, left, right, okeys[i1:i2]) and not _doubled(snip, okeys, i1, i2, new):
            continue
        a = oat[i1] if i1 < len(oat) else len(olines)
        b = oat[i2 - 1] + 1 if i2 > i1 else a
        if all(k in plain for k in new) and _in_exact_hunk(merge, a, b):
            continue
        at = aat[j1] + 1 if j1 < j2 else (aat[j1 - 1] + 1 if j1 else 0)
        out.append(
            {
                "delete": f"after answer line {at}: original lines {a + 1}-{b} dropped "
                "outside the edited regions (the snippet shows no deletion there)",
                "insert": f"answer line {at}: lines added outside the edited regions (the "
                "snippet does not show them there)",
                "replace": f"answer line {at}: original lines {a + 1}-{b} changed outside "
                "the edited regions (the snippet does not show this change)",
            }[op]
        )
    return out + _broken_pairs(snip, akeys)

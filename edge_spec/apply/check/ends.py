"""The file's first or last line written twice: a snippet end read as new lines.

A snippet with no marker at an end reaches the file's end there. When its last line (its last
line that is more than a closer) is the original's last such line, that line is the file's end
shown as context, and where the snippet shows it once a right answer holds it once, as the
original does. An answer that holds it twice kept the original's tail beside the snippet's: the
lines the snippet shows replacing that tail were inserted instead (the same for the first line
at an unmarked start).
"""

from __future__ import annotations

from collections.abc import Sequence

from edge_spec.apply.merge.anchors import LineIndex, norm
from edge_spec.apply.merge.markers import classify_markers


def _edge_key(lines: Sequence[str], index: LineIndex, last: bool) -> tuple[str, int] | None:
    """The first (last) line of `lines` that is more than a closer, as a key, and its number."""
    order = range(len(lines) - 1, -1, -1) if last else range(len(lines))
    for i in order:
        k = norm(lines[i])
        if k and not index.trivial(k):
            return k, i
    return None


def ends_twice(original: str, snippet: str, answer: str, language: str) -> list[str]:
    """One finding per unmarked snippet end whose edge line, the original's own edge line
    (once there and once in the snippet), the answer writes twice."""
    olines = original.replace("\r\n", "\n").split("\n")
    slines = snippet.replace("\r\n", "\n").split("\n")
    index = LineIndex(olines)
    flags = classify_markers(slines, index, language)
    keyed = [i for i, ln in enumerate(slines) if norm(ln) or flags[i]]
    if not keyed:
        return []
    akeys = [norm(ln) for ln in answer.replace("\r\n", "\n").split("\n")]
    marks = [i for i in keyed if flags[i]]
    out = []
    for last in (False, True):
        if flags[keyed[-1] if last else keyed[0]]:
            continue  # a marked end: the file goes on beyond it
        if last:
            run = [i for i in keyed if i > max(marks, default=-1)]
        else:
            run = [i for i in keyed if i < min(marks, default=len(slines))]
        mine = _edge_key([slines[i] for i in run], index, last)
        theirs = _edge_key(olines, index, last)
        if mine is None or theirs is None or mine[0] != theirs[0]:
            continue
        shown = sum(1 for ln in slines if norm(ln) == mine[0])
        if len(index.pos.get(mine[0], ())) == 1 and shown == 1 and akeys.count(mine[0]) > 1:
            side = "last" if last else "first"
            out.append(
                f"the original's {side} line ({olines[theirs[1]].strip()[:60]}), which the "
                f"snippet shows at its unmarked {'end' if last else 'start'}, is written twice"
            )
    return out

"""Definitions a snippet gives whole in another order than the original's: a reordering.

Where a hunk shows two or more whole definitions, each matching exactly one original definition
by name and kind, standing together (nothing but blank lines between them) in the hunk and in
the original, but in another order, the hunk rewrites that stretch of the original: the
snippet's order is the edit. Read definition by definition, each would pair with its own
original and the pairs would cross, so the one placed second would be written again as new
code (the file would then define it twice). The stretch is replaced as one block instead,
from the first definition's first line to the last one's last line, on both sides.
"""

from __future__ import annotations

from collections.abc import Sequence

from edge_spec.apply.merge.context import Ctx
from edge_spec.apply.merge.markers import Hunk
from edge_spec.apply.merge.pins import Match, whole

Block = tuple[int, int, int, int]  # hunk lines [j0, j1], original lines [i0, i1], inclusive


def _together(lines: Sequence[str], spans: Sequence[tuple[int, int]]) -> bool:
    """Whether nothing but blank lines stands between consecutive spans (sorted by start)."""
    return all(
        a_end < b_start and not any(ln.strip() for ln in lines[a_end + 1 : b_start])
        for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False)
    )


def reordered(ctx: Ctx, hunk: Hunk, matches: Sequence[Match]) -> Block | None:
    """The stretch a hunk's whole definitions rewrite in another order, if they do (module
    doc); None otherwise."""
    if len(matches) < 2:
        return None
    nonblank = [j for j, ln in enumerate(hunk.lines) if ln.strip()]
    if not all(whole(ctx, hunk, it, d, nonblank) for it, d in matches):
        return None
    mine = sorted((it.start, it.end) for it, _ in matches)
    theirs = sorted((d.start, d.end) for _, d in matches)
    by_hunk = [d.start for _, d in sorted(matches, key=lambda m: m[0].start)]
    if by_hunk == sorted(by_hunk):
        return None  # in the original's order: each pairs with its own
    if not (_together(hunk.lines, mine) and _together(ctx.index.lines, theirs)):
        return None
    return mine[0][0], mine[-1][1], theirs[0][0], theirs[-1][1]

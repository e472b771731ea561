"""The other placements an unsure hunk may have: its span's ends moved a few lines.

Most of the merge's doubts are about where a hunk's span ends, not where it is: an insertion
or a replacement at an edge next to a marker, more or fewer original lines replaced, lines at
an unmarked snippet end deleted or kept. Those readings differ only in the span's two ends, so
moving each end by up to `reach` lines (never past a neighbour's span) lists them, with the
merge's own placement first. Which of them the snippet allows is for the answer check to say,
and which is meant for the model.
"""

from __future__ import annotations

from edge_spec.apply.merge.structural import Edit, MergeResult


def alternative_edits(merge: MergeResult, hunk: int, n_lines: int, reach: int) -> list[Edit]:
    """Hunk `hunk`'s edit and the same lines in place of spans with ends moved by up to
    `reach` lines, inside the gap its neighbours leave (`n_lines`: the original's length)."""
    edits = merge.edits
    own = edits[hunk]
    lo = edits[hunk - 1].end if hunk > 0 else 0
    hi = edits[hunk + 1].start if hunk + 1 < len(edits) else n_lines
    out = [own]
    for start in range(max(lo, own.start - reach), min(own.start + reach, own.end, hi) + 1):
        for end in range(max(start, own.end - reach), min(hi, own.end + reach) + 1):
            if (start, end) != (own.start, own.end):
                out.append(Edit(start, end, own.lines))
    return out

"""The other placements an unsure hunk may have: its span's ends moved a few lines.

Most of the merge's doubts are about where a hunk's span ends, not where it is: an insertion
or a replacement at an edge next to a marker, more or fewer original lines replaced, lines at
an unmarked snippet end deleted or kept. Those readings differ only in the span's two ends, so
moving each end by up to `reach` lines (never past a neighbour's span) lists them, with the
merge's own placement first; a move over original lines that repeat the hunk's own edge lines
counts only the lines beyond them. Which of them the snippet allows is for the answer check to say,
and which is meant for the model. Where the doubt is where the hunk stands (its context occurs
at several places), the same lines at each other place its leading and trailing context fit
are readings too (`relocated_edits`).
"""

from __future__ import annotations

from collections.abc import Sequence

from edge_spec.apply.merge.anchors import norm
from edge_spec.apply.merge.context import WHOLE_FILE
from edge_spec.apply.merge.structural import Edit, MergeResult

# Doubts about where a hunk stands, not where its span ends: its context also fits elsewhere.
_WHERE = (
    "context matches ",
    "only weak context lines match",
    "context also matches original lines",
    "the context at original line ",
)

# How much longer than the merge's own span a relocated span may be.
_STRETCH = 3


def alternative_edits(
    merge: MergeResult, hunk: int, olines: Sequence[str], reach: int
) -> list[Edit]:
    """Hunk `hunk`'s edit and the same lines in place of spans with ends moved by up to
    `reach` lines, inside the gap its neighbours leave. An end moved over original lines that
    the hunk's own edge lines repeat moves by the rest only: where the merge took the hunk's
    leading context for new lines, the span that keeps that context and replaces what follows
    is a short move, however long the context."""
    edits = merge.edits
    own = edits[hunk]
    lo = edits[hunk - 1].end if hunk > 0 else 0
    hi = edits[hunk + 1].start if hunk + 1 < len(edits) else len(olines)
    keys = [norm(ln) for ln in olines]
    mine = [norm(ln) for ln in own.lines]
    starts = set(range(max(lo, own.start - reach), min(own.start + reach, own.end, hi) + 1))
    starts |= {
        s
        for s in range(lo, own.start - reach)
        if own.start - s - _common(mine, keys[s : own.start]) <= reach
    }
    ends = set(range(own.end - reach, own.end + reach + 1))
    ends |= {
        e
        for e in range(own.end + reach + 1, hi + 1)
        if e - own.end - _common(mine[::-1], keys[own.end : e][::-1]) <= reach
    }
    out = [own]
    for start in sorted(starts):
        for end in sorted(e for e in ends if max(start, lo) <= e <= hi):
            if (start, end) != (own.start, own.end):
                out.append(Edit(start, end, own.lines))
    return out


def to_file_ends(merge: MergeResult, hunk: int, n_lines: int, reason: str) -> list[Edit]:
    """Where the doubt is whether a marker-free snippet is the whole file: its span run on to
    the original's first and last lines (what lies beyond deleted)."""
    if not reason.startswith(WHOLE_FILE):
        return []
    own = merge.edits[hunk]
    lo = merge.edits[hunk - 1].end if hunk > 0 else 0
    hi = merge.edits[hunk + 1].start if hunk + 1 < len(merge.edits) else n_lines
    spans = {(own.start, hi), (lo, own.end), (lo, hi)} - {(own.start, own.end)}
    return [Edit(a, b, own.lines) for a, b in sorted(spans)]


def doubts_where(reason: str) -> bool:
    """Whether a hunk's doubt is where it stands (its context also fits elsewhere)."""
    return reason.startswith(_WHERE)


def relocated_edits(merge: MergeResult, hunk: int, olines: Sequence[str]) -> list[Edit]:
    """Hunk `hunk`'s lines at each other place of the original where its leading context
    starts a span and its trailing context ends it, inside the gap its neighbours leave."""
    edits = merge.edits
    own = edits[hunk]
    keys = [norm(ln) for ln in olines]
    mine = [norm(ln) for ln in own.lines]
    lead = _common(mine, keys[own.start : own.end])
    trail = _common(mine[::-1], keys[own.start : own.end][::-1])
    if not any(mine[:lead]) or not any(mine[len(mine) - trail :]) or lead + trail > len(mine):
        return []
    head, tail = mine[:lead], mine[len(mine) - trail :]
    lo = edits[hunk - 1].end if hunk > 0 else 0
    hi = edits[hunk + 1].start if hunk + 1 < len(edits) else len(olines)
    longest = _STRETCH * max(own.end - own.start, len(mine))
    out = []
    for p in range(lo, hi - lead + 1):
        if p == own.start or keys[p : p + lead] != head:
            continue
        for q in range(p + lead, min(hi, p + longest) - trail + 1):
            if keys[q : q + trail] == tail:
                out.append(Edit(p, q + trail, own.lines))
                break
    return out


def _common(a: Sequence[str], b: Sequence[str]) -> int:
    """How many leading items `a` and `b` share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n

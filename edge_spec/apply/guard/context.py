"""What a placement of the snippet reads as context, for the order guard: the original line a
hunk's context line stands on (`context_pairs`), and the original line a sure hunk is inserted
after (`hunk_follows`). A merged file's copy of such a line goes on with the hunk."""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from edge_spec.apply.merge import MergeResult
from edge_spec.apply.merge.anchors import is_trivial, norm


def hunk_follows(original: str, merge: MergeResult | None) -> list[tuple[int, bytes, int]]:
    """(original line, the line a merged file writes next, the blank lines between), 0-based
    over the LF text's lines, for the original line right before each hunk the merge placed for
    sure (`exact`): what the merged file has after it, where that is not the original's next
    line. Lines are compared without their indentation."""
    if merge is None or len(merge.edits) != len(merge.hunks):
        return []
    olines = original.split("\n")
    starts = {e.start for e in merge.edits}
    out: list[tuple[int, bytes, int]] = []
    for hunk, edit in zip(merge.hunks, merge.edits, strict=True):
        if hunk.status != "exact":
            continue
        before = next((q for q in range(edit.start - 1, -1, -1) if olines[q].strip()), None)
        if before is None:
            continue
        gap = edit.start - before - 1
        after = [*edit.lines]
        nxt = next((ln for ln in after if ln.strip()), None)
        if nxt is None:  # a deletion: the original goes on after it, unless another edit does
            gap += len(after)
            rest = next((q for q in range(edit.end, len(olines)) if olines[q].strip()), None)
            if rest is None or any(edit.end <= st <= rest for st in starts - {edit.start}):
                continue
            gap, nxt = gap + rest - edit.end, olines[rest]
        else:
            gap += after.index(nxt)
        out.append((before, nxt.strip(" \t").encode("utf-8"), gap))
    return out


def context_pairs(original: str, update: str, merge: MergeResult | None) -> list[tuple[int, int]]:
    """(original line, snippet line), 0-based over the LF texts' lines: each line a hunk the
    merge placed for sure (`exact`) has as context, with the original line it stands on, and of
    the other hunks the lines that are context wherever they go (`_unique_pairs`). Lines are
    compared without their indentation; blank lines are left out."""
    if merge is None:
        return []
    olines, ulines = original.split("\n"), update.split("\n")
    once = _once(olines, ulines)
    out: list[tuple[int, int]] = []
    for hunk in merge.hunks:
        if hunk.original_span is None:
            continue
        (a, b), (lo, hi) = hunk.snippet_span, hunk.original_span
        mine = [ln.strip() for ln in ulines[a - 1 : b]]
        theirs = [ln.strip() for ln in olines[lo:hi]]
        if hunk.status == "exact":
            out.extend((lo + i, a - 1 + j) for i, j in _matches(theirs, mine) if theirs[i])
        else:
            out.extend(_unique_pairs(once, olines, ulines, a - 1, b))
    return out


def _once(olines: Sequence[str], ulines: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Lines (stripped) more than a closer that each text has exactly once -> their two
    indices."""

    def single(lines: Sequence[str]) -> dict[str, int]:
        seen: dict[str, int] = {}
        for n, ln in enumerate(lines):
            key = ln.strip()
            if key and not is_trivial(norm(key)):
                seen[key] = -1 if key in seen else n
        return {k: n for k, n in seen.items() if n >= 0}

    mine, theirs = single(ulines), single(olines)
    return {k: (theirs[k], n) for k, n in mine.items() if k in theirs}


def _unique_pairs(
    once: dict[str, tuple[int, int]],
    olines: Sequence[str],
    ulines: Sequence[str],
    a: int,
    b: int,
) -> list[tuple[int, int]]:
    """The context of a hunk (snippet lines [a, b)) the merge is unsure of that is context
    whatever its placement: the run of lines at each of its ends that goes on as the original
    does around a line the two texts each have once, up to new code. Where the merge doubts is where the
    hunk's span ends, not which line such a run stands for; a line deeper in the hunk may be
    new code that happens to equal an original line. None when the hunk's once-lines come in
    another order in the original (a moved line is new code where it lands)."""
    mine = [j for j in range(a, b) if ulines[j].strip()]
    keyed = sorted(once[k] for k in {ulines[j].strip() for j in mine} if k in once)
    keyed = [(o, s) for o, s in keyed if a <= s < b]
    if any(s2 <= s1 for (_, s1), (_, s2) in zip(keyed, keyed[1:], strict=False)):
        return []
    theirs = [q for q, ln in enumerate(olines) if ln.strip()]
    known = {olines[q].strip() for q in theirs}
    at = {q: n for n, q in enumerate(theirs)}
    if not any(ln.strip() for ln in ulines[:a]) or not any(ln.strip() for ln in ulines[b:]):
        # An unmarked end of the snippet is the file's: the original's lines beyond it may be
        # deleted, so a run there is where the answer starts (or ends), not a copy to pin.
        return []
    out: list[tuple[int, int]] = []
    for side in (mine, mine[::-1]):
        step = 1 if side is mine else -1
        first = next((t for t, j in enumerate(side) if ulines[j].strip() in once), None)
        if first is None:
            continue
        p = at[once[ulines[side[first]].strip()][0]]
        run = []
        for t, j in enumerate(side):
            q = p + (t - first) * step
            # At its own indentation: a line moved into another block is new code there.
            if not 0 <= q < len(theirs) or olines[theirs[q]].rstrip() != ulines[j].rstrip():
                break
            run.append((theirs[q], j))
        inner = side[len(run)] if len(run) < len(side) else None
        # The run ends on new code (or spans the hunk): a line of the original beyond it may
        # follow a deletion, which the run alone cannot say.
        if len(run) > first and (inner is None or ulines[inner].strip() not in known):
            out.extend(run)
    return sorted(set(out))


def _matches(theirs: list[str], mine: list[str]) -> list[tuple[int, int]]:
    """Equal lines of a placed hunk and the original span it stands on: the hunk's leading
    and trailing context first (the placement anchors them at the span's ends; a longest-block
    match can pair a repeated line such as `});` with the wrong one), then the middle by a
    sequence match."""
    head = 0
    while head < min(len(theirs), len(mine)) and theirs[head] == mine[head]:
        head += 1
    tail = 0
    while tail < min(len(theirs), len(mine)) - head and theirs[-1 - tail] == mine[-1 - tail]:
        tail += 1
    pairs = [(i, i) for i in range(head)]
    mid_t, mid_m = theirs[head : len(theirs) - tail], mine[head : len(mine) - tail]
    for i, j, n in SequenceMatcher(None, mid_t, mid_m, autojunk=False).get_matching_blocks():
        pairs.extend((head + i + d, head + j + d) for d in range(n))
    pairs.extend((len(theirs) - 1 - d, len(mine) - 1 - d) for d in range(tail))
    return pairs

"""What a snippet's markers keep: the original code between the runs around each marker.

A marker says "the original code here, unchanged". Where the context next to a marker pins
its place in the original (the run's lines beside the marker are a block of original lines
found at exactly one place, with a line that identifies it), the answer must hold the original
lines that follow that block (or precede it) exactly: all of them up to the next run when both
sides are pinned, the file's rest at an end, and at least an unbroken prefix (suffix) of them
otherwise. Where the snippet shows a line the original has once under the marker (code moved
out from under it, or new code that repeats it), the marker still keeps the original lines
right before the next run's block, read past such lines. This needs no placement of the
merge, so a wrong span there does not hide an answer that drops or rewrites code under a
marker: the lines between the imports and a new function, a test block taken out of a run of
look-alike tests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from edge_spec.apply.merge.anchors import LineIndex, is_distinctive, norm
from edge_spec.apply.merge.markers import classify_markers

# How many original lines beside a pinned block a marker keeps for sure where the snippet
# moves code out from under it.
_BESIDE = 3


def _keys(lines: Sequence[str]) -> list[str]:
    return [k for k in map(norm, lines) if k]


def _widths(lines: Sequence[str]) -> list[int]:
    """The indentation of each non-blank line (the lines `_keys` keeps)."""
    return [len(ln.expandtabs(4)) - len(ln.expandtabs(4).lstrip()) for ln in lines if norm(ln)]


def _same_shape(run_w: Sequence[int], orig_w: Sequence[int]) -> bool:
    """Whether a block is indented alike in the run and the original (by a constant shift):
    closing brackets match anywhere by text, so only their depth tells one from another."""
    return len({a - b for a, b in zip(run_w, orig_w, strict=True)}) <= 1


def _places(block: Sequence[str], keys: Sequence[str]) -> list[int]:
    """Where `block` starts as a contiguous run of `keys`."""
    n = len(block)
    if not n:
        return []
    return [
        i
        for i in range(len(keys) - n + 1)
        if keys[i] == block[0] and list(keys[i : i + n]) == list(block)
    ]


@dataclass(frozen=True)
class _Pin:
    """A run's edge block next to a marker and where it is in the original's keys."""

    block: tuple[str, ...]
    at: int  # start of the block in the original's keys


def _pin(
    run: tuple[list[str], list[int]],
    okeys: Sequence[str],
    owidths: Sequence[int],
    once: Mapping[str, int],
    tail: bool,
) -> _Pin | None:
    """The longest block at the run's marker side found in the original, when it is at one
    place only, indented as there, and holds an identifying line (`once`: where each line the
    original has once stands)."""
    keys, widths = run
    best: tuple[tuple[str, ...], list[int]] | None = None
    for t in range(1, len(keys) + 1):
        block = tuple(keys[-t:] if tail else keys[:t])
        found = _places(block, okeys)
        if not found:
            break
        best = (block, found)
    if best is None or len(best[1]) != 1:
        return None
    block, at = best[0], best[1][0]
    # One identifying line ending a longer run may be a rewritten block's coincidental tail;
    # one that opens the run right after a marker is where the marker's code ends.
    need = 1 if len(block) == len(keys) or (not tail and is_distinctive(block[0])) else 2
    if sum(map(is_distinctive, block)) < need:
        return None
    mine = widths[-len(block) :] if tail else widths[: len(block)]
    if not _same_shape(mine, owidths[at : at + len(block)]):
        return None
    # A re-indented snippet shifts all of a run alike; a block shifted otherwise than the
    # run's other lines the original has once is code moved into another block, not context.
    shift = mine[0] - owidths[at]
    rest = range(len(keys) - len(block)) if tail else range(len(block), len(keys))
    if any(keys[j] in once and widths[j] - owidths[once[keys[j]]] != shift for j in rest):
        return None
    return _Pin(block, at)


Run = tuple[list[str], list[int]]  # a run's keys and their indentation


def _runs(original: Sequence[str], snippet: Sequence[str], language: str) -> list[Run | None]:
    """The snippet's runs of keys, with None for each marker between or around them."""
    flags = classify_markers(snippet, LineIndex(original), language)
    out: list[Run | None] = [([], [])]
    for ln, mark in zip(snippet, flags, strict=True):
        if mark:
            out += [None, ([], [])]
        elif norm(ln):
            run = out[-1]
            assert run is not None
            run[0].append(norm(ln))
            run[1].extend(_widths([ln]))
    return [r for r in out if r is None or r[0]]


def _moved(
    okeys: Sequence[str], lo: int, hi: int | None, shown: set[str], until: str | None = None
) -> bool:
    """Whether the original code under a marker holds an identifying line, found once in the
    original, that the snippet shows elsewhere: the snippet moves code out of there, so the
    marker keeps less than all of it. With no pinned end, the marker's code ends at the last
    place of the next run's first line (`until`), not at the file's end: a line the snippet
    shows after that run was never under this marker."""
    if hi is None and until is not None and until in okeys[lo:]:
        hi = max(i for i in range(lo, len(okeys)) if okeys[i] == until)
    moving = _moving(okeys, shown)
    return any(k in moving for k in okeys[lo:hi])


def _moving(okeys: Sequence[str], shown: set[str]) -> set[str]:
    """Identifying lines the original has once and the snippet shows: code it may move."""
    once = {k for k, n in Counter(okeys).items() if n == 1}
    return {k for k in shown if k in once and is_distinctive(k)}


def _kept_after(
    akeys: Sequence[str],
    okeys: Sequence[str],
    pin: _Pin,
    until: tuple[str, ...] | None,
    exact_end: int | None,
) -> bool:
    """Whether some place of the pin's block in the answer goes on as the original does."""
    n, i = len(pin.block), pin.at + len(pin.block)
    for a in _places(pin.block, akeys):
        rest = akeys[a + n :]
        if exact_end is not None:
            want = list(okeys[i:exact_end])
            if rest[: len(want)] == want and (
                until is None or tuple(rest[len(want) : len(want) + len(until)]) == until
            ):
                return True
            continue
        stop = next((k for k, key in enumerate(rest) if until and key == until[0]), len(rest))
        # A marker stands for some code: at least its first line stays, unless the original
        # too goes on with the next run there (a marker put between adjacent blocks).
        empty = i == len(okeys) or (until is not None and okeys[i] == until[0])
        if (stop or empty) and list(rest[:stop]) == list(okeys[i : i + stop]):
            return True
    return False


def _kept_before(akeys: Sequence[str], okeys: Sequence[str], pin: _Pin, since: str | None) -> bool:
    """Mirror of `_kept_after` for the block after a marker: what precedes it is the
    original's, back to the last line of the run before the marker (`since`; None: the file's
    start, so all of it)."""
    for a in _places(pin.block, akeys):
        head = akeys[:a]
        if since is None:
            if list(head) == list(okeys[: pin.at]):
                return True
            continue
        start = next((k + 1 for k in range(len(head) - 1, -1, -1) if head[k] == since), 0)
        got = list(head[start:])
        if (got or not pin.at) and got == list(okeys[pin.at - len(got) : pin.at]):
            return True
    return False


def _near_kept(
    akeys: Sequence[str], okeys: Sequence[str], pin: _Pin, shown: set[str], since: str | None
) -> bool:
    """Where the snippet moves code out from under the marker before a pinned block, the
    marker still keeps the original lines right before the block: the nearest `_BESIDE` of
    them after the run before the marker (`since`), read past the lines the snippet moves
    (shows, and the original has once)."""
    moving = _moving(okeys, shown)

    def kept(keys: Sequence[str]) -> list[str]:
        return [k for k in keys if k not in moving]

    lo = next((i + 1 for i in range(pin.at - 1, -1, -1) if okeys[i] == since), 0)
    want = kept(okeys[lo : pin.at])[-_BESIDE:]
    return not want or any(kept(akeys[:a])[-len(want) :] == want for a in _places(pin.block, akeys))


def marker_gaps(original: str, snippet: str, answer: str, language: str) -> list[str]:
    """One finding per marker whose original code the answer does not keep."""
    olines = original.replace("\r\n", "\n").split("\n")
    okeys, owidths = _keys(olines), _widths(olines)
    akeys = _keys(answer.replace("\r\n", "\n").split("\n"))
    runs = _runs(olines, snippet.replace("\r\n", "\n").split("\n"), language)
    shown = {k for r in runs if r is not None for k in r[0]}
    counts = Counter(okeys)
    once = {k: i for i, k in enumerate(okeys) if counts[k] == 1}
    out: list[str] = []
    for k, run in enumerate(runs):
        if run is not None:
            continue
        before = runs[k - 1] if k > 0 else None
        after = runs[k + 1] if k + 1 < len(runs) else None
        left = _pin(before, okeys, owidths, once, tail=True) if before else None
        right = _pin(after, okeys, owidths, once, tail=False) if after else None
        both = left is not None and right is not None and right.at >= left.at + len(left.block)
        if left is not None:
            end = right.at if both and right else (len(okeys) if after is None else None)
            until = right.block if both and right else (tuple(after[0][:1]) if after else None)
            lo = left.at + len(left.block)
            nxt = until[0] if until else None
            if not _moved(okeys, lo, end, shown, nxt) and not _kept_after(
                akeys, okeys, left, until, end
            ):
                out.append(
                    f"the original lines after {left.block[-1][:50]!r} are not kept "
                    "where the snippet's marker says they stay"
                )
                continue
        if right is not None and not both:
            since = before[0][-1] if before else None
            if _moved(okeys, 0, right.at, shown):
                kept = _near_kept(akeys, okeys, right, shown, since)
            else:
                kept = _kept_before(akeys, okeys, right, since)
            if not kept:
                out.append(
                    f"the original lines before {right.block[0][:50]!r} are not kept "
                    "where the snippet's marker says they stay"
                )
    return out

"""Line anchoring: where the context lines of a snippet hunk sit in the original.

Lines compare by their text with all whitespace runs collapsed (`norm`), so trailing whitespace,
CRLF and re-indentation never break a match; indentation is checked separately by the caller.

A hunk is matched to the original by *blocks*: maximal runs of consecutive hunk lines equal to
consecutive original lines. Only blocks seeded by a line that carries identity (`is_trivial` is
false: not blank, not only brackets and keywords) count; runs of `}` or blank lines alone are
everywhere. A *chain* is an ordered set of blocks, scored by the weight of the matched lines
(rare lines weigh more) minus the cost of the gaps between blocks. A gap costs little for
snippet lines that have no original counterpart (new code), and grows with the logarithm of the
original lines it would remove: a far-away coincidental match is not worth skipping hundreds of
lines, a three-line context block after a deleted function is. Lines found once in the original
and once in the hunk are the surest anchors (as in patience diff): among the hunk's outer lines
they weigh more in a block, and a gap that would replace one that the hunk shows elsewhere
costs extra.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

_TOKEN = re.compile(r"[A-Za-z_$][\w$]*|\d+")
# Words that never identify a line by themselves: keywords, literals, common receivers.
_KEYWORDS = frozenset(
    """
if else elif elsif for while do return break continue pass try except finally catch throw raise
end fi done esac then in of not and or is None True False null nil true false undefined self this
super def func function fn class struct impl pub let const var new default case switch yield await
async with as import from package use mod static void int bool string str err error ok Ok Some
""".split()
)
_MAX_SEED_OCCURRENCES = 64
_MAX_BLOCKS = 400
# What a line found once in the original and once in the hunk adds to its block's weight: a
# block of lines that each recur a few times (doc comments, parameter lists, sorted table
# entries) must not outweigh the surest anchors.
_ANCHOR_BONUS = 1.0
# How many code lines at each end of a hunk may take that weight: a hunk joins the file at its
# outer context, while a line inside it that the original has elsewhere may be moved code.
_EDGE = 2
PairOk = Callable[[int, int], bool]


def norm(line: str) -> str:
    """A line's text for matching: whitespace runs collapsed, ends stripped, and a byte order
    mark (an editor's, at the file's start) dropped."""
    return " ".join(line.replace("\ufeff", "").split())


def is_trivial(key: str) -> bool:
    """Whether a normalised line carries no identity (`}`, `else:`, `return None`, blank)."""
    return all(tok in _KEYWORDS for tok in _TOKEN.findall(key))


def identifiers(key: str) -> list[str]:
    """A line's words that can identify it: its tokens less keywords and literals."""
    return [t for t in _TOKEN.findall(key) if t not in _KEYWORDS]


def is_distinctive(key: str) -> bool:
    """Whether one line alone can pin a hunk when it is unique: a few identifiers or long."""
    toks = identifiers(key)
    return len(toks) >= 2 or (len(toks) == 1 and len(key) >= 12)


def indent_of(line: str) -> str:
    """The leading spaces and tabs."""
    return line[: len(line) - len(line.lstrip(" \t"))]


class LineIndex:
    """The original's lines with their keys, positions of each key and indentation."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = list(lines)
        self.keys = [norm(ln) for ln in self.lines]
        self.indents = [indent_of(ln) for ln in self.lines]
        self.pos: dict[str, list[int]] = {}
        for i, key in enumerate(self.keys):
            self.pos.setdefault(key, []).append(i)
        self._trivial: dict[str, bool] = {}

    def __len__(self) -> int:
        return len(self.lines)

    def trivial(self, key: str) -> bool:
        hit = self._trivial.get(key)
        if hit is None:
            hit = self._trivial[key] = is_trivial(key)
        return hit

    def weight(self, key: str) -> float:
        if not key:
            return 0.05
        if self.trivial(key):
            return 0.15
        return 1.0 / math.sqrt(max(1, len(self.pos.get(key, ()))))

    def occurrences(self, key: str, lo: int, hi: int) -> list[int]:
        occ = self.pos.get(key, [])
        return occ[bisect_left(occ, lo) : bisect_left(occ, hi)]

    def next_nonblank(self, i: int, step: int) -> int | None:
        k = i + step
        while 0 <= k < len(self.keys):
            if self.keys[k]:
                return k
            k += step
        return None

    def count_run(self, keys: Sequence[str], lo: int, hi: int) -> list[int]:
        """Start positions in [lo, hi) where the original has `keys` as consecutive lines."""
        if not keys:
            return []
        pivot = min(range(len(keys)), key=lambda k: len(self.pos.get(keys[k], ())))
        starts = []
        for i in self.occurrences(keys[pivot], lo + pivot, hi):
            s = i - pivot
            if s + len(keys) <= hi and all(self.keys[s + k] == keys[k] for k in range(len(keys))):
                starts.append(s)
        return starts


class Block(NamedTuple):
    """Hunk lines [j, j+n) equal original lines [i, i+n)."""

    j: int
    i: int
    n: int
    w: float


@dataclass(frozen=True)
class Chain:
    """An ordered set of matched blocks: one placement of a hunk's context."""

    blocks: tuple[Block, ...]
    score: float

    @property
    def start(self) -> int:
        return self.blocks[0].i

    @property
    def end(self) -> int:
        last = self.blocks[-1]
        return last.i + last.n


def find_blocks(
    hkeys: Sequence[str], index: LineIndex, lo: int, hi: int, pair_ok: PairOk | None = None
) -> list[Block]:
    """Maximal diagonal runs of equal lines inside original [lo, hi), seeded by identity lines."""
    m = len(hkeys)

    def same(j: int, i: int) -> bool:
        return hkeys[j] == index.keys[i] and (pair_ok is None or pair_ok(j, i))

    seen: set[tuple[int, int]] = set()
    blocks: list[Block] = []
    code = [j for j, k in enumerate(hkeys) if k]
    edges = set(code[:_EDGE] + code[-_EDGE:])
    anchors = {j for _, j in anchor_lines(hkeys, index) if j in edges}
    for j, key in enumerate(hkeys):
        if not key or index.trivial(key) or len(index.pos.get(key, ())) > _MAX_SEED_OCCURRENCES:
            continue
        for i in index.occurrences(key, lo, hi):
            if not same(j, i):
                continue
            j0, i0 = j, i
            while j0 > 0 and i0 > lo and same(j0 - 1, i0 - 1):
                j0, i0 = j0 - 1, i0 - 1
            if (j0, i0) in seen:
                continue
            seen.add((j0, i0))
            n = 0
            while j0 + n < m and i0 + n < hi and same(j0 + n, i0 + n):
                n += 1
            w = sum(
                index.weight(hkeys[j0 + k]) + _ANCHOR_BONUS * (j0 + k in anchors) for k in range(n)
            )
            blocks.append(Block(j0, i0, n, w))
    if len(blocks) > _MAX_BLOCKS:
        blocks = sorted(blocks, key=lambda b: -b.w)[:_MAX_BLOCKS]
    return sorted(blocks)


def anchor_lines(hkeys: Sequence[str], index: LineIndex) -> list[tuple[int, int]]:
    """(original line, hunk line) for the lines unique both in the original and in the hunk.

    Such a line is the most reliable anchor there is (as in patience diff): a chain that
    replaces or deletes it while the hunk shows it somewhere else is misaligned.
    """
    seen: dict[str, int] = {}
    for j, k in enumerate(hkeys):
        seen[k] = -1 if k in seen else j
    return sorted(
        (index.pos[k][0], j)
        for k, j in seen.items()
        if j >= 0 and k and len(index.pos.get(k, ())) == 1 and not index.trivial(k)
    )


def _contradicted(uniq: Sequence[tuple[int, int]], ja: int, jb: int, ia: int, ib: int) -> int:
    """How many unique lines in original [ia, ib) the hunk shows outside its lines [ja, jb)."""
    k = bisect_left(uniq, (ia, -1))
    n = 0
    while k < len(uniq) and uniq[k][0] < ib:
        n += not ja <= uniq[k][1] < jb
        k += 1
    return n


def gap_cost(gj: int, gi: int) -> float:
    """What chaining two blocks costs: `gj` snippet lines replace `gi` original lines.

    Removing original lines costs (more when more are removed than added); new lines cost
    little, so an insertion beats replacing unrelated code of the same size. Blocks adjacent in
    the snippet (a pure deletion between them) chain more cheaply than blocks with new lines
    between them: a changed line that equals a unique line far away is rarely a coincidence.
    """
    if gj == 0:  # the snippet shows both blocks adjacent: a deletion, cheaper than a skip
        return 0.15 * math.log2(1 + gi)
    return (
        0.3 * math.log2(1 + max(0, gi - gj))
        + 0.1 * math.log2(1 + min(gi, gj))
        + 0.05 * math.log2(1 + gj)
    )


def _tail_weight(index: LineIndex, hkeys: Sequence[str], b: Block, drop: int) -> float:
    return sum(index.weight(hkeys[b.j + b.n - 1 - k]) for k in range(drop))


def best_chain(
    blocks: Sequence[Block],
    exclude: tuple[int, int] | None = None,
    index: LineIndex | None = None,
    hkeys: Sequence[str] = (),
    uniq: Sequence[tuple[int, int]] = (),
) -> Chain | None:
    """The best-scoring chain of blocks, optionally avoiding original lines [a, b).

    A block may be cut short where it runs into the next one (blank lines after a context line
    match on both sides of an insertion); with `index` and `hkeys` the cut lines' weight is
    taken off.
    """
    usable = [b for b in blocks if exclude is None or b.i + b.n <= exclude[0] or b.i >= exclude[1]]
    if not usable:
        return None
    best: list[float] = []
    prev: list[tuple[int, int]] = []
    for k, b in enumerate(usable):
        score, back = b.w, (-1, 0)
        for a in range(k):
            pa = usable[a]
            if pa.j >= b.j or pa.i >= b.i:
                continue
            cut = max(0, pa.j + pa.n - b.j, pa.i + pa.n - b.i)
            if cut >= pa.n:
                continue
            dropped = _tail_weight(index, hkeys, pa, cut) if cut and index else 0.1 * cut
            n = pa.n - cut
            cand = best[a] - dropped + b.w - gap_cost(b.j - pa.j - n, b.i - pa.i - n)
            if uniq:  # replacing a line the hunk shows elsewhere costs as if two went missing
                cand -= 2.0 * _contradicted(uniq, pa.j + n, b.j, pa.i + n, b.i)
            if cand > score:
                score, back = cand, (a, cut)
        best.append(score)
        prev.append(back)
    top = max(range(len(usable)), key=lambda t: best[t])
    chain: list[Block] = []
    k, cut = top, 0
    while k >= 0:
        b = usable[k]
        chain.append(
            b
            if not cut
            else Block(
                b.j,
                b.i,
                b.n - cut,
                b.w - (_tail_weight(index, hkeys, b, cut) if index else 0.1 * cut),
            )
        )
        k, cut = prev[k]
    return Chain(tuple(reversed(chain)), best[top])


def candidate_chains(
    blocks: Sequence[Block], index: LineIndex, hkeys: Sequence[str], limit: int = 3
) -> list[Chain]:
    """Up to `limit` disjoint placements, best first."""
    out: list[Chain] = []
    excluded: list[tuple[int, int]] = []
    pool = list(blocks)
    uniq = anchor_lines(hkeys, index)
    while len(out) < limit and pool:
        chain = best_chain(pool, None, index, hkeys, uniq)
        if chain is None:
            break
        out.append(chain)
        excluded.append((chain.start, chain.end))
        pool = [b for b in pool if all(b.i + b.n <= a or b.i >= z for a, z in excluded)]
    return out


def pick_ordered(cands: Sequence[Sequence[Chain]]) -> list[Chain | None]:
    """One chain per hunk (or none), in file order without overlap, maximising total score."""
    n = len(cands)
    best: list[list[float]] = []  # best total of a placement ending with (hunk, candidate)
    back: list[list[tuple[int, int] | None]] = []
    for h in range(n):
        row: list[float] = []
        brow: list[tuple[int, int] | None] = []
        for chain in cands[h]:
            score, link = chain.score, None
            for ph in range(h - 1, -1, -1):
                for pc, pchain in enumerate(cands[ph]):
                    if pchain.end <= chain.start and best[ph][pc] + chain.score > score:
                        score, link = best[ph][pc] + chain.score, (ph, pc)
            row.append(score)
            brow.append(link)
        best.append(row)
        back.append(brow)
    chosen: list[Chain | None] = [None] * n
    tops = [(best[h][k], h, k) for h in range(n) for k in range(len(cands[h]))]
    if not tops:
        return chosen
    _, h, k = max(tops)
    ptr: tuple[int, int] | None = (h, k)
    while ptr is not None:
        h, k = ptr
        chosen[h] = cands[h][k]
        ptr = back[h][k]
    return chosen

"""A decode-time guard that keeps every line of the output to a given set of lines.

An applied edit is made of lines the original or the snippet already has (indentation aside),
so an apply target that may write only those lines cannot invent a marker in its own words, a
comment out of the instruction, or a reworded line. Like the marker guard it is part of the
target: the loop masks every logits row with it in plain and speculative decoding alike.

A row's mask depends only on the current line's bytes without their indentation (`key`): the
line must stay a prefix of an allowed line, a token that ends it must end it on an allowed line
(or a blank one), and whatever a token starts after its newlines must be allowed in turn.
Control tokens (no bytes: end of text) may only end a complete line. Indentation (spaces and
tabs) is free; trailing blanks only where an allowed line has them. The allowed ids of a row
are found from the allowed lines, not by scanning the vocabulary: for each line the current one
is a prefix of, the tokens equal to a prefix of the rest. Work is on bytes, so a character
split over two tokens is matched exactly.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from edge_spec.apply.guard.lines import last_line, line_context
from edge_spec.apply.guard.order import LineOrder, OrderState
from edge_spec.apply.guard.vocabindex import VocabIndex
from edge_spec.runtimes.base import Only, RowBan

_WS = b" \t"  # indentation


@dataclass(frozen=True)
class LineState:
    """Where the output stands: `line_context` of it, how often each allowed line (by its
    stripped bytes) has been written, the lines written as often as allowed, where the
    answer stands in the texts' order (when the guard keeps it), and how many blank lines it
    has just written."""

    ctx: bytes
    used: dict[bytes, int] = field(default_factory=dict, compare=False)
    spent: frozenset[bytes] = frozenset()
    order: OrderState | None = None
    blanks: int = 0


class LineSet:
    """Bans every token that would make the current line one not in `lines`, or one written
    as often as `lines` has it already (blank lines always allowed; indentation too, unless
    `indents` gives a line the indentations it may have: then it has one of them). `ends`
    (the closing fence) and the end of text may only come after one of `tails` (the last
    lines the answer can have) when `tails` are given, or once every tail line is spent.
    With `order`, the lines must also keep its order (`edge_spec.apply.guard.order`) and the end waits
    for it too. A token that completes a line and starts the next is judged for the next by
    the counts before it and the order after the line it completes. Where the order leaves no
    line to write and may not end (a dead end), it lets go and these rules alone go on: ending
    there would drop the rest of the file. Past `spill` blank lines
    in a row (more than a merged file has) the end is allowed whatever the rules say, and no
    further blank line nor indentation deeper than the texts have: an answer that went wrong
    where no rule can stop it ends there (or writes a line) instead of running to the token
    budget on blanks."""

    def __init__(
        self,
        index: VocabIndex,
        lines: Iterable[bytes],
        ends: Iterable[bytes] = (),
        tails: Iterable[bytes] = (),
        order: LineOrder | None = None,
        spill: int | None = None,
        indents: Mapping[bytes, Iterable[bytes]] | None = None,
    ) -> None:
        self._ix = index
        # Line (stripped) -> the indentations it may have (a line not named: any).
        self._ind = None if indents is None else {k: frozenset(v) for k, v in indents.items()}
        self._spaces = [(ws, ids) for ws, ids in index.lead_ws.get(b"", {}).items()]
        self._order = order
        self._spill = spill
        lines = list(lines)
        # With `spill`, indentation past the texts' deepest (and some slack for a re-indented
        # block) is a model writing blanks instead of a line it may not write: no more of them.
        self._indent = (
            1 << 30
            if spill is None
            else max((len(ln) - len(ln.lstrip(_WS)) for ln in lines), default=0) + 8
        )
        # A blank line is empty unless the texts have blank lines with blanks on them.
        self._blank_pad = spill is None or any(ln and not ln.strip(_WS) for ln in lines)
        body = _forms(lines)
        self._max = Counter(ln.strip(_WS) for ln in lines if ln.strip(_WS))
        # Per regime (may the answer end here?): the allowed lines, as a set and sorted.
        self._sets = (body, body | _forms(ends))
        self._sorted = tuple(sorted(x) for x in self._sets)
        self._stripped = tuple(frozenset(x.strip(_WS) for x in s) for s in self._sets)
        self._indent_cache: dict[
            tuple[bool, frozenset[bytes], OrderState | None, int], frozenset[bytes] | None
        ] = {}
        # Line -> every beginning of an indentation it may have.
        self._prefixes = {
            k: frozenset(a[:i] for a in v for i in range(len(a) + 1))
            for k, v in (self._ind or {}).items()
        }
        self._tails = _forms(tails)
        self._tail_keys = frozenset(t.strip(_WS) for t in self._tails)
        self._cache: dict[
            tuple[bool, bytes, frozenset[bytes], OrderState | None, int, int, bytes | None], RowBan
        ] = {}
        self._ends, self._rests = index.ends, index.rests
        # At a line's start, per regime: the newline tokens whose first segment may be written
        # there (blank, or an allowed line), split into those with only blanks after it.
        self._heads = tuple(
            [
                (head, *index.heads[head])
                for head in index.heads
                if not head.strip(_WS) or head in self._sets[regime]
            ]
            for regime in (False, True)
        )
        self._from: dict[tuple[bytes, bool], list[bytes]] = {}
        self._dead: dict[tuple[frozenset[bytes], OrderState], bool] = {}
        # Blank counts a dead-end check tries: a reading needs at most the texts' longest
        # blank run before its line, and the guard counts no further than spill + 2.
        self._blank_cap = (2 if spill is None else spill) + 3
        self._first_ids: dict[bytes, set[int]] = {}
        self._first_at: dict[tuple[bytes, frozenset[bytes]], set[int]] = {}

    def start(self, tail: bytes) -> LineState:
        return LineState(line_context(tail), order=OrderState() if self._order else None)

    def advance(self, state: LineState, piece: bytes) -> LineState:
        """The state after `piece`; a line it completes counts as written."""
        if b"\n" not in piece:
            return LineState(state.ctx + piece, state.used, state.spent, state.order, state.blanks)
        used, spent, order, blanks = state.used, state.spent, state.order, state.blanks
        for seg in (last_line(state.ctx) + piece).split(b"\n")[:-1]:
            key = seg.strip(_WS)
            if key in self._max:
                if used is state.used:
                    used = dict(used)
                used[key] = used.get(key, 0) + 1
                if used[key] >= self._max[key]:
                    spent = spent | {key}
            if key:
                order = self._step(order, key, blanks)
            blanks = 0 if key else blanks + 1
        return LineState(line_context(state.ctx + piece), used, spent, order, blanks)

    def _step(self, order: OrderState | None, key: bytes, blanks: int) -> OrderState | None:
        return (
            order if order is None or self._order is None else self._order.step(order, key, blanks)
        )

    def _barred(
        self, spent: frozenset[bytes], order: OrderState | None, blanks: int
    ) -> frozenset[bytes]:
        """The lines that may not come next: spent ones, and those the order bars, unless the
        order has come to a dead end."""
        if order is None or self._order is None:
            return spent
        barred = spent | self._order.barred(order, blanks)
        if barred >= self._order.keys and self._dead_end(spent, order):
            return spent
        return barred

    def dead_end(self, state: LineState) -> bool:
        """Whether the order has let go in `state` (see `_dead_end`)."""
        return (
            state.order is not None
            and self._order is not None
            and self._dead_end(state.spent, state.order)
        )

    def _dead_end(self, spent: frozenset[bytes], order: OrderState) -> bool:
        """Whether the order leaves no line to write, after any number of blank lines, and
        may not end: an answer that went wrong where the rules let it. Ending it there drops
        the rest of the file, so the order lets go instead and the lines rules alone go on
        (the order's next step most likely finds no reading and stops constraining). This
        is a function of the state, as every mask is: plain and speculative decoding agree."""
        assert self._order is not None
        got = self._dead.get((spent, order))
        if got is None:
            if len(self._dead) > 4096:
                self._dead.clear()
            lo = self._order
            left = lo.keys - spent
            got = (
                order.pos is not None
                and not lo.may_end(order)
                and all(left <= lo.barred(order, b) for b in range(self._blank_cap))
            )
            self._dead[(spent, order)] = got
        return got

    def _room(self, order: OrderState | None, blanks: int) -> int:
        """How many more blank lines may follow `blanks` of them: past `spill` only the end
        or a line, and where the order pins the next line, its own blank lines."""
        room = 1 << 30 if self._spill is None else self._spill + 1 - blanks
        if order is None or self._order is None:
            return room
        return min(room, self._order.blank_room(order, blanks))

    def _tail(
        self, line: bytes, spent: frozenset[bytes], order: OrderState | None = None, blanks: int = 0
    ) -> bool:
        """Whether the answer may end after `line` (unindented; empty: no line yet), with
        `order` the order's state before it and `blanks` the blank lines right before it."""
        key = line.strip(_WS)
        if self._tails and key not in self._tail_keys and not self._tail_keys <= spent:
            return False
        if order is None or self._order is None:
            return True
        return self._order.may_end(self._order.step(order, key, blanks) if key else order)

    def _rest_ok(
        self, tid: int, regime: bool, spent: frozenset[bytes], order: OrderState | None, blanks: int
    ) -> bool:
        """Whether what newline token `tid` writes after its first newline is allowed, with
        `order` and `blanks` where the answer stands after that newline."""
        rest = self._rests.get(tid)
        if rest is None:
            return True
        for seg in rest[:-1]:
            body = seg.lstrip(_WS)
            key = body.strip(_WS)
            if not key:
                if self._room(order, blanks) < 1 or (seg and not self._blank_pad):
                    return False
                blanks += 1
                continue
            if (
                body not in self._sets[regime]
                or key in self._barred(spent, order, blanks)
                or (not self._fits(key, seg[: len(seg) - len(body)]))
            ):
                return False
            regime = self._tail(body, spent, order, blanks)
            order, blanks = self._step(order, key, blanks), 0
        last = rest[-1].lstrip(_WS)
        if not last:
            return not rest[-1] or self._indent_ok(regime, spent, order, blanks, rest[-1])
        ind = rest[-1][: len(rest[-1]) - len(last)]
        return any(
            self._fits(ln, ind)
            for ln in self._lines_from(last, regime, self._barred(spent, order, blanks))
        )

    def _merged(
        self,
        tids: list[int],
        regime: bool,
        spent: frozenset[bytes],
        order: OrderState | None,
        blanks: int,
    ) -> list[int]:
        """Of newline tokens with only blank lines after their first newline (`blanks`
        before it), those that go as far toward the fewest blank lines a line may follow as
        one token can. The tokenizer writes a run of newlines in as few tokens as it can, so
        a model that stopped short has never seen the blank line it now owes written apart,
        and writes another line instead."""
        ix = self._ix
        runs = {ix.blank_lines[t] for t in tids if t not in ix.indents}
        if len(runs) < 2:
            return tids
        if regime and self._at_end(spent, order, blanks, max(runs)):
            # Only the end is left: with the blank lines the original ends with, no more.
            assert self._order is not None
            end = [
                t
                for t in tids
                if t in ix.indents or blanks + ix.blank_lines[t] == self._order.tail_blanks
            ]
            return end if any(t not in ix.indents for t in end) else tids
        need = next(
            (
                b
                for b in range(max(runs) + self._blank_cap)
                if not self._blanks_only(regime, spent, order, blanks + b)
            ),
            0,
        )
        best = max((b for b in runs if b <= need), default=0)
        return [t for t in tids if t in ix.indents or ix.blank_lines[t] >= best]

    def _flows(
        self, spent: frozenset[bytes], order: OrderState | None, blanks: int
    ) -> frozenset[bytes] | None:
        """The lines the order lets come after `blanks` blank lines, a hunk begun anew aside
        (`LineOrder.flowing`), less the spent ones; None where the order does not say."""
        if (
            order is None
            or self._order is None
            or order.pos is None
            or self._dead_end(spent, order)
        ):
            return None
        return self._order.flowing(order, blanks) - spent

    def _at_end(
        self, spent: frozenset[bytes], order: OrderState | None, blanks: int, most: int
    ) -> bool:
        """Whether no line may follow after any of the next `most` blank lines: the
        original's last line is written and only the end is left."""
        flows = [self._flows(spent, order, blanks + b) for b in range(most + 1)]
        return all(got is not None and not got for got in flows)

    def _blanks_only(
        self, regime: bool, spent: frozenset[bytes], order: OrderState | None, blanks: int
    ) -> bool:
        """Whether nothing but a blank line (or a hunk begun anew) may come after `blanks`
        of them."""
        if regime or (self._spill is not None and blanks > self._spill):
            return False
        if order is None or self._order is None:
            return self._stripped[False] <= spent
        got = self._flows(spent, order, blanks)
        return got is not None and not got

    def _fits(self, line: bytes, ind: bytes) -> bool:
        """Whether `line` may have the indentation `ind`."""
        allowed = None if self._ind is None else self._ind.get(line.strip(_WS))
        return allowed is None or ind in allowed

    def _indent_ok(
        self,
        regime: bool,
        spent: frozenset[bytes],
        order: OrderState | None,
        blanks: int,
        ws: bytes = b"",
    ) -> bool:
        """Whether a line may open with indentation (`ws`, where the guard keeps it) here:
        some line may follow it, or a blank line may carry it. Otherwise indentation leads
        nowhere (the line needs a blank line before it first, and a blank line may not carry
        blanks): a model that starts one has no way on but the end."""
        if self._blank_pad and self._room(order, blanks) >= 1:
            return True
        reach = self._reach(regime, spent, order, blanks)
        return reach is None or ws in reach

    def _reach(
        self, regime: bool, spent: frozenset[bytes], order: OrderState | None, blanks: int
    ) -> frozenset[bytes] | None:
        """The indentations (and their beginnings) a line allowed here may have; None: any."""
        key = (regime, spent, order, blanks)
        if key in self._indent_cache:
            return self._indent_cache[key]
        if len(self._indent_cache) > 8192:
            self._indent_cache.clear()
        keys = self._stripped[regime] - self._barred(spent, order, blanks)
        got: frozenset[bytes] | None = frozenset()
        if keys and self._ind is None:
            got = None
        elif keys:
            out: set[bytes] = set()
            for k in keys:
                pre = self._prefixes.get(k)
                if pre is None:
                    got = None
                    break
                out |= pre
            else:
                got = frozenset(out)
        self._indent_cache[key] = got
        return got

    def _lines_from(self, key: bytes, regime: bool, spent: frozenset[bytes]) -> list[bytes]:
        """The allowed lines `key` starts, less the ones spent."""
        got = self._from.get((key, regime))
        if got is None:
            lines = self._sorted[regime]
            lo = bisect_left(lines, key)
            hi = bisect_left(lines, key + b"\xff" * 4, lo)
            got = self._from[(key, regime)] = [ln for ln in lines[lo:hi] if ln.startswith(key)]
        return [ln for ln in got if ln.strip(_WS) not in spent] if spent else got

    def _firsts(self, line: bytes, ind: bytes | None = None) -> set[int]:
        """The tokens that may open `line` after the indentation `ind` (None: any), their own
        leading blanks included."""
        allowed = None if ind is None or self._ind is None else self._ind.get(line.strip(_WS))
        if allowed is None:
            got = self._first_ids.get(line)
            if got is None:
                got = self._first_ids[line] = _along([line], 0, self._ix.lead, self._ix.lead_sorted)
            return got
        assert ind is not None
        need = frozenset(a[len(ind) :] for a in allowed if a.startswith(ind))
        key = (line, need)
        got = self._first_at.get(key)
        if got is None:
            got = self._first_at[key] = (
                _along_ws(line, need, self._ix.lead_ws, self._ix.lead_sorted) if need else set()
            )
        return got

    def banned(self, state: LineState | bytes | str) -> RowBan:
        """The row mask in `state` (or after bytes, with no line written yet)."""
        if isinstance(state, str):
            state = state.encode("utf-8")
        if isinstance(state, bytes):
            state = LineState(state)
        line, spent, order = state.ctx, state.spent, state.order
        cut = line.rfind(b"\n")
        prev = line[: line.find(b"\n")].strip(_WS) if cut >= 0 else b""
        # `order` has seen `prev` already: only the tail rule is asked about it.
        regime = self._tail(prev or b"\n", spent) and (
            order is None or self._order is None or self._order.may_end(order)
        )
        if self._spill is not None and state.blanks > self._spill:
            regime = True
        blanks = state.blanks if self._spill is None else min(state.blanks, self._spill + 2)
        rest = line[cut + 1 :]
        body = rest.lstrip(_WS)
        pad = 0 if body or not rest else (2 if len(rest) >= self._indent else 1)
        ind = None if self._ind is None else rest[: len(rest) - len(body)]
        key = (regime, body, spent, order, blanks, pad, ind)
        got = self._cache.get(key)
        if got is None:
            if len(self._cache) > 8192:
                self._cache.clear()
            got = self._cache[key] = self._allowed(*key)
        return got

    def _allowed(
        self,
        regime: bool,
        key: bytes,
        spent: frozenset[bytes],
        order: OrderState | None,
        blanks: int,
        pad: int,
        ind: bytes | None,
    ) -> RowBan:
        """The allowed ids; `pad`: the line so far is blanks only (1), deeper than the texts
        indent (2), or not (0); `ind`: its indentation, where the guard keeps indentation."""
        ix, ids = self._ix, set[int]()
        barred = self._barred(spent, order, blanks)
        if not key:
            # Indentation, then the start of a line left; a blank line or the end.
            ids.update(
                *(
                    self._firsts(ln, ind)
                    for ln in self._sorted[regime]
                    if ln.strip(_WS) not in barred
                )
            )
            if pad < 2 and self._indent_ok(regime, spent, order, blanks):
                reach = (
                    None
                    if self._blank_pad and self._room(order, blanks) >= 1
                    else (self._reach(regime, spent, order, blanks))
                )
                ids.update(
                    *(
                        tids
                        for ws, tids in self._spaces
                        if ind is None or reach is None or ind + ws in reach
                    )
                )
            room = self._room(order, blanks)
            for head, plain, other in self._heads[regime]:
                first = head.strip(_WS)
                if first in barred or (not first and (room < 1 or (pad and not self._blank_pad))):
                    continue  # (a blank line with blanks on it where the texts have none)
                if not self._blank_pad:  # (nor one the token itself pads, first or later)
                    plain = [
                        t for t in plain if t not in ix.padded and (first or t not in ix.head_ws)
                    ]
                    other = [
                        t for t in other if t not in ix.padded and (first or t not in ix.head_ws)
                    ]
                if first:  # the token completes a line, then writes more
                    after, nxt, gap = (
                        self._tail(head, spent, order, blanks),
                        self._step(order, first, blanks),
                        0,
                    )
                    more = self._room(nxt, 0)
                else:  # a blank line, then more
                    after, nxt, gap, more = regime, order, blanks + 1, room - 1
                if first and ind is not None:  # the line it completes keeps its indentation
                    plain = [t for t in plain if self._fits(first, ind + ix.head_ws.get(t, b""))]
                    other = [t for t in other if self._fits(first, ind + ix.head_ws.get(t, b""))]
                ids.update(
                    self._merged(
                        [
                            t
                            for t in plain
                            if ix.blank_lines[t] <= more
                            and (
                                t not in ix.indents
                                or self._indent_ok(
                                    after, spent, nxt, gap + ix.blank_lines[t], ix.indents[t]
                                )
                            )
                        ],
                        after,
                        spent,
                        nxt,
                        gap,
                    )
                )
                ids.update(t for t in other if self._rest_ok(t, after, spent, nxt, gap))
            if regime or not ids:  # (no line, blank or not, left to write: a dead end stops)
                ids.update(ix.control)
            return Only(_sorted_ids(ids))
        cands = self._lines_from(key, regime, barred)
        if not cands:
            # A line the guard never allowed (the prompt's last line): nothing to keep it to.
            return np.zeros(0, dtype=np.int64)
        if ind is not None:
            cands = [ln for ln in cands if self._fits(ln, ind)] or cands
        ids.update(_along(cands, len(key), ix.exact, ix.exact_sorted))
        for ln in cands:
            ends = self._ends.get(ln[len(key) :], ())
            if not ends:
                continue
            after = self._tail(ln, spent, order, blanks)
            nxt = self._step(order, ln.strip(_WS), blanks)
            more = self._room(nxt, 0)
            ok = [t for t in ends if self._blank_pad or t not in ix.padded]
            ids.update(t for t in ok if t in self._rests and self._rest_ok(t, after, spent, nxt, 0))
            ids.update(
                self._merged(
                    [
                        t
                        for t in ok
                        if t not in self._rests
                        and (
                            ix.blank_lines[t] <= more
                            and (
                                t not in ix.indents
                                or self._indent_ok(
                                    after, spent, nxt, ix.blank_lines[t], ix.indents[t]
                                )
                            )
                        )
                    ],
                    after,
                    spent,
                    nxt,
                    0,
                )
            )
        if key in cands and self._tail(key, spent, order, blanks):  # the end may follow
            ids.update(ix.control)
        return Only(_sorted_ids(ids))


def _sorted_ids(ids: set[int]) -> np.ndarray:
    arr = np.fromiter(ids, dtype=np.int64, count=len(ids))
    arr.sort()
    return arr


def _forms(lines: Iterable[bytes]) -> frozenset[bytes]:
    """Lines as the guard compares them: without indentation, with and without trailing
    blanks; blank lines left out (always allowed)."""
    out: set[bytes] = set()
    for ln in lines:
        body = ln.lstrip(_WS)
        if body.strip(_WS):
            out.update((body, body.rstrip(_WS)))
    return frozenset(out)


def _along(
    lines: list[bytes], at: int, tokens: dict[bytes, list[int]], texts: list[bytes]
) -> set[int]:
    """Ids of the tokens equal to a piece of some line that begins at offset `at` (`texts`:
    the keys of `tokens`, sorted)."""
    ids: set[int] = set()
    seen: set[bytes] = set()
    for ln in lines:
        for j in range(at + 1, len(ln) + 1):
            piece = ln[at:j]
            if piece in seen:
                continue
            seen.add(piece)
            got = tokens.get(piece)
            if got is not None:
                ids.update(got)
            i = bisect_left(texts, piece)
            if i == len(texts) or not texts[i].startswith(piece):
                break  # no token starts with this piece: none is longer along this line
    return ids


def _along_ws(
    line: bytes,
    need: frozenset[bytes],
    tokens: dict[bytes, dict[bytes, list[int]]],
    texts: list[bytes],
) -> set[int]:
    """Ids of the tokens equal to one of the blanks in `need`, then a piece of `line` from its
    start (`texts`: the keys of `tokens`, sorted)."""
    ids: set[int] = set()
    for j in range(1, len(line) + 1):
        piece = line[:j]
        got = tokens.get(piece)
        if got is not None:
            for ws in need:
                ids.update(got.get(ws, ()))
        i = bisect_left(texts, piece)
        if i == len(texts) or not texts[i].startswith(piece):
            break
    return ids

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
from collections.abc import Callable, Iterable

import numpy as np

from edge_spec.runtimes.base import Only, RowBan

_WS = b" \t"  # indentation


class VocabIndex:
    """A vocabulary's token bytes arranged for line lookups (built once per vocabulary)."""

    def __init__(self, token_bytes: Callable[[int], bytes], n_vocab: int) -> None:
        self.exact: dict[bytes, list[int]] = {}  # token bytes (no newline) -> ids
        self.lead: dict[bytes, list[int]] = {}  # the same without leading blanks -> ids
        self.control: list[int] = []  # tokens with no bytes (end of text and the like)
        # Tokens with a newline: (id, bytes before the first newline, segments after it).
        self.newline: list[tuple[int, bytes, tuple[bytes, ...]]] = []
        self.longest = 1
        for tid in range(n_vocab):
            raw = token_bytes(tid)
            if not raw:
                self.control.append(tid)
            elif b"\n" in raw:
                first, *rest = raw.split(b"\n")
                self.newline.append((tid, first, tuple(rest)))
            else:
                self.exact.setdefault(raw, []).append(tid)
                self.lead.setdefault(raw.lstrip(_WS), []).append(tid)
                self.longest = max(self.longest, len(raw))
        # Sorted, so a piece of a line that no token starts with ends the lookups along it.
        self.exact_sorted = sorted(self.exact)
        self.lead_sorted = sorted(self.lead)


class LineSet:
    """Bans every token that would make the current line one not in `lines` (blank lines and
    indentation always allowed). `ends` (the closing fence) and the end of text may only come
    after one of `tails` (the last lines the answer can have), when `tails` are given."""

    def __init__(self, index: VocabIndex, lines: Iterable[bytes], ends: Iterable[bytes] = (),
                 tails: Iterable[bytes] = ()) -> None:
        self._ix = index
        body, finals = _forms(lines), _forms(tails)
        # Per regime (may the answer end here?): the allowed lines, as a set and sorted.
        self._sets = (body, body | _forms(ends))
        self._sorted = tuple(sorted(x) for x in self._sets)
        self._tails = finals
        self._cache: dict[tuple[bool, bytes], RowBan] = {}
        # Newline tokens whose segments after the first newline are allowed, for each regime
        # after that newline, by what their first segment must complete: its bytes (after a
        # partial line), or its bytes without the indentation (at a line's start).
        self._ends: tuple[dict[bytes, list[int]], ...] = ({}, {})
        self._starts: tuple[dict[bytes, list[int]], ...] = ({}, {})
        for tid, first, rest in index.newline:
            for regime in (False, True):
                if self._rest_ok(rest, regime):
                    self._ends[regime].setdefault(first, []).append(tid)
                    self._starts[regime].setdefault(first.lstrip(_WS), []).append(tid)
        self._heads = sorted(set(self._starts[0]) | set(self._starts[1]))

    def _tail(self, line: bytes) -> bool:
        """Whether the answer may end after `line` (unindented, not blank)."""
        return not self._tails or line in self._tails

    def _after(self, regime: bool, segment: bytes) -> bool:
        body = segment.lstrip(_WS)
        return regime if not body.strip(_WS) else self._tail(body)

    def _rest_ok(self, rest: tuple[bytes, ...], regime: bool) -> bool:
        for seg in rest[:-1]:
            body = seg.lstrip(_WS)
            if body.strip(_WS) and body not in self._sets[regime]:
                return False
            regime = self._after(regime, seg)
        return self._open(rest[-1].lstrip(_WS), regime)

    def _open(self, key: bytes, regime: bool) -> bool:
        """Whether a line whose unindented bytes are `key` can still end on an allowed line."""
        if not key or key in self._sets[regime]:
            return True
        lines = self._sorted[regime]
        i = bisect_left(lines, key)
        return i < len(lines) and lines[i].startswith(key)

    def banned(self, line: bytes | str) -> RowBan:
        """The row mask after `line` (`line_context`: the current line's bytes so far, after
        the last non-blank line before it): the allowed ids."""
        if isinstance(line, str):
            line = line.encode("utf-8")
        cut = line.rfind(b"\n")
        prev = line[:line.find(b"\n")].strip(_WS) if cut >= 0 else b""
        regime = bool(prev) and self._tail(prev) or not self._tails
        key = (regime, line[cut + 1:].lstrip(_WS))
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = self._allowed(*key)
        return got

    def _allowed(self, regime: bool, key: bytes) -> RowBan:
        ix, ids = self._ix, set[int]()
        lines = self._sorted[regime]
        if not key:
            # Any indentation, then the start of an allowed line; a blank line or the end.
            ids.update(_along(lines, 0, ix.lead, ix.lead_sorted))
            ids.update(ix.lead.get(b"", ()))
            for head in self._heads:
                if not head.strip(_WS) or head in self._sets[regime]:
                    ids.update(self._starts[self._after(regime, head)].get(head, ()))
            if regime:
                ids.update(ix.control)
            return Only(np.asarray(sorted(ids), dtype=np.int64))
        if not self._open(key, regime):
            # A line the guard never allowed (the prompt's last line): nothing to keep it to.
            return np.zeros(0, dtype=np.int64)
        lo = bisect_left(lines, key)
        hi = bisect_left(lines, key + b"\xff" * 4, lo)  # the lines `key` starts
        cands = [ln for ln in lines[lo:hi] if ln.startswith(key)]
        ids.update(_along(cands, len(key), ix.exact, ix.exact_sorted))
        for ln in cands:
            ids.update(self._ends[self._tail(ln)].get(ln[len(key):], ()))
        if key in self._sets[regime] and self._tail(key):  # the end may follow
            ids.update(ix.control)
        return Only(np.asarray(sorted(ids), dtype=np.int64))


def _forms(lines: Iterable[bytes]) -> frozenset[bytes]:
    """Lines as the guard compares them: without indentation, with and without trailing
    blanks; blank lines left out (always allowed)."""
    out: set[bytes] = set()
    for ln in lines:
        body = ln.lstrip(_WS)
        if body.strip(_WS):
            out.update((body, body.rstrip(_WS)))
    return frozenset(out)


def _along(lines: list[bytes], at: int, tokens: dict[bytes, list[int]],
           texts: list[bytes]) -> set[int]:
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

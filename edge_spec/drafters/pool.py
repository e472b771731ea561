"""Pool drafter: continue the context the way the engine's earlier outputs went on.

An IDE or an agent asks for the same edit again and again: one rename or import move applied
file after file, the same helper pasted into several modules, chat turns quoting an earlier
answer. Within one request the reference drafter sees none of that; the pool holds every output
the engine wrote (one `OutputPool` per engine and user), and `PoolDrafter` proposes what followed
the longest earlier occurrence of the context's suffix, with the share of the occurrences that
went on the same way as each token's confidence (SuffixDecoding's frequency; llama.cpp's
ngram-cache keeps a pool across requests the same way).

The index maps every `pool_ngram`-token n-gram of the pool to the positions after it (the most
recent `pool_candidates` of them); a lookup extends each occurrence backwards to measure its
match, up to `pool_match_max` tokens. Outputs are kept whole, oldest first out, while the
pool's estimated memory stays under `pool_max_mb`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Iterator, Sequence

import numpy as np

from edge_spec.config.settings import PoolSettings
from edge_spec.core.types import EMPTY, Draft, Reference
from edge_spec.drafters.reference import length_bucket

# Estimated bytes one pooled token holds: its slot in the token list, its n-gram key tuple
# and dict entry, and its position in a candidate list (the pool's tests measure it with
# tracemalloc and check this stays an upper bound).
BYTES_PER_TOKEN = 360
_SEP = -1  # between outputs: no match or continuation crosses it


class OutputPool:
    """A bounded n-gram index over the outputs an engine wrote, shared across its requests."""

    def __init__(self, config: PoolSettings | None = None) -> None:
        self.cfg = config or PoolSettings()
        self.capacity = int(self.cfg.pool_max_mb * (1 << 20) / BYTES_PER_TOKEN)
        self._toks: list[int] = []  # the live outputs, each followed by _SEP
        self._base = 0  # global position of _toks[0]: positions never move on eviction
        self._docs: deque[tuple[int, int]] = deque()  # (global start, length incl. _SEP)
        self._index: dict[tuple[int, ...], list[int]] = {}

    def __len__(self) -> int:
        return len(self._toks)

    @property
    def outputs(self) -> int:
        return len(self._docs)

    def add(self, tokens: Sequence[int]) -> None:
        """Index one output; evict the oldest ones while the pool is over its bound."""
        toks = [int(t) for t in tokens]
        n = self.cfg.pool_ngram
        if len(toks) <= n or len(toks) + 1 > self.capacity:
            return
        start = self._base + len(self._toks)
        self._toks.extend(toks)
        self._toks.append(_SEP)
        self._docs.append((start, len(toks) + 1))
        cap = self.cfg.pool_candidates
        for i in range(n, len(toks)):
            slots = self._index.setdefault(tuple(toks[i - n : i]), [])
            slots.append(start + i)
            if len(slots) > cap:
                del slots[0]
        while len(self._toks) > self.capacity:
            self._evict()

    def _evict(self) -> None:
        start, size = self._docs.popleft()
        n = self.cfg.pool_ngram
        toks = self._toks[:size]
        self._base += size
        for i in range(n, size - 1):
            key = tuple(toks[i - n : i])
            slots = self._index.get(key)
            if not slots:
                continue
            # Positions are sorted: the evicted output's are at the front.
            cut = bisect_left(slots, self._base)
            if cut >= len(slots):
                del self._index[key]
            elif cut:
                del slots[:cut]
        del self._toks[:size]

    def at(self, pos: int) -> int:
        """The token at a global position (`_SEP` past the pool's end)."""
        i = pos - self._base
        return self._toks[i] if 0 <= i < len(self._toks) else _SEP

    def matches(self, context: Sequence[int]) -> tuple[int, list[int]]:
        """(longest match, the positions that follow each occurrence matching that long)."""
        n = self.cfg.pool_ngram
        if len(context) < n:
            return 0, []
        slots = self._index.get(tuple(context[-n:]))
        if not slots:
            return 0, []
        best, found = 0, list[int]()
        for p in slots:
            m = self._match_len(p, context)
            if m > best:
                best, found = m, [p]
            elif m == best:
                found.append(p)
        return best, found

    def _match_len(self, p: int, context: Sequence[int]) -> int:
        i, lim = p - self._base, min(self.cfg.pool_match_max, len(context))
        toks, m = self._toks, 0
        while m < lim and m < i and toks[i - 1 - m] == context[-1 - m]:
            m += 1
        return m

    def continuation(self, found: list[int], limit: int) -> Iterator[tuple[int, float]]:
        """Tokens that follow the occurrences, each the most frequent next one among those
        that agreed so far, with that frequency; stops when no occurrence goes on."""
        live = list(found)
        for j in range(limit):
            if len(live) == 1:  # one occurrence left: copy it, up to its output's end
                i = live[0] + j - self._base
                run = self._toks[i : i + limit - j] if 0 <= i < len(self._toks) else []
                if _SEP in run:  # look no further than the draft can use
                    run = run[: run.index(_SEP)]
                yield from ((t, 1.0) for t in run)
                return
            nxt = [self.at(p + j) for p in live]
            counts = Counter(t for t in nxt if t != _SEP)
            if not counts:
                return
            # Ties go to the most recent occurrence: the last output is likeliest repeated.
            top = max(counts.values())
            tok = next(t for t in reversed(nxt) if counts.get(t) == top)
            yield tok, top / len(live)
            live = [p for p, t in zip(live, nxt, strict=True) if t == tok]


class PoolDrafter:
    """Drafts from an `OutputPool`; its features name the match length and the request kind
    (apply or chat), so the controller learns each apart."""

    name = "pool"

    def __init__(self, pool: OutputPool) -> None:
        self.pool = pool
        self._kind = "chat"

    def begin(
        self, prompt: Sequence[int], references: Sequence[Reference], rng: np.random.Generator
    ) -> None:
        # References come with apply requests; free prompts and chats have none.
        self._kind = "apply" if references else "chat"

    def propose(self, context: Sequence[int], max_len: int) -> Draft:
        if max_len <= 0:
            return EMPTY
        length, found = self.pool.matches(context)
        if length < self.pool.cfg.pool_ngram:
            return EMPTY
        tokens: list[int] = []
        conf: list[float] = []
        floor = self.pool.cfg.pool_min_share
        for tok, share in self.pool.continuation(found, max_len):
            if share < floor:
                break
            tokens.append(tok)
            conf.append(share)
        if not tokens:
            return EMPTY
        feature = f"pool-{length_bucket(length)}-{self._kind}"
        return Draft(tokens=tokens, source="pool", feature=feature, confidence=conf)

    def observe(self, draft: Draft, accepted: int) -> None:
        """Nothing to learn here: the controller keeps the acceptance rates per feature."""

"""Pool drafter: continue the output the way the engine's earlier outputs went on.

An IDE or an agent asks for the same edit again and again: one rename or import move applied
file after file, the same helper pasted into several modules, chat turns quoting an earlier
answer. Within one request the reference drafter sees none of that; the pool holds every output
the engine wrote (one `OutputPool` per engine and user), and `PoolDrafter` proposes what followed
the longest earlier occurrence of the output's suffix, with the share of the occurrences that
went on the same way as each token's confidence (SuffixDecoding's frequency; llama.cpp's
ngram-cache keeps a pool across requests the same way).

The index maps every `pool_ngram`-token n-gram of the pool to the positions after it (the most
recent `pool_candidates` of them); a lookup extends each occurrence backwards to measure its
match, up to `pool_match_max` tokens. Each output is stored after a separator and matched
against the separator plus the current output (the pool holds no prompts), so the start of an
answer matches the starts of earlier ones. Outputs are kept whole, oldest first out, while the
pool's estimated memory stays under `pool_max_mb`.

Like the reference drafter, the drafter follows the occurrence it copies: a draft taken whole
goes on from where it ended, and after a rejection (a renamed word) it looks for the output's
last tokens a little further on in the same occurrence, so the copy picks up again at once
instead of waiting for a fresh match long enough to be trusted.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Sequence

import numpy as np

from edge_spec.config.settings import PoolSettings
from edge_spec.core.types import EMPTY, Draft, Reference
from edge_spec.drafters.reference import length_bucket

# Estimated bytes one pooled token holds: its slot in the token list, its n-gram key tuple
# and dict entry, and its position in a candidate list (the pool's tests measure it with
# tracemalloc and check this stays an upper bound).
BYTES_PER_TOKEN = 360
SEP = -1  # before each output: no match or continuation crosses it
# How far past a rejected token the drafter looks for the output's last tokens in the
# occurrence it was copying, and how many output tokens it waits for them.
_RESYNC_WINDOW = 24
_RESYNC_KEY = 2


class OutputPool:
    """A bounded n-gram index over the outputs an engine wrote, shared across its requests."""

    def __init__(self, config: PoolSettings | None = None) -> None:
        self.cfg = config or PoolSettings()
        self.capacity = int(self.cfg.pool_max_mb * (1 << 20) / BYTES_PER_TOKEN)
        self._toks: list[int] = []  # SEP, output, SEP, output, ...
        self._base = 0  # global position of _toks[0]: positions never move on eviction
        self._docs: deque[tuple[int, int]] = deque()  # (global start, length incl. SEP)
        self._index: dict[tuple[int, ...], list[int]] = {}

    def __len__(self) -> int:
        return len(self._toks)

    @property
    def outputs(self) -> int:
        return len(self._docs)

    def _keys(self, doc: Sequence[int]) -> list[tuple[int, ...]]:
        """The key before each position of a stored output (shorter at its start)."""
        n = self.cfg.pool_ngram
        return [tuple(doc[max(0, i - n) : i]) for i in range(1, len(doc))]

    def add(self, tokens: Sequence[int]) -> None:
        """Index one output; evict the oldest ones while the pool is over its bound."""
        doc = [SEP, *(int(t) for t in tokens)]
        if len(doc) <= self.cfg.pool_ngram or len(doc) > self.capacity:
            return
        start = self._base + len(self._toks)
        self._toks.extend(doc)
        self._docs.append((start, len(doc)))
        cap = self.cfg.pool_candidates
        for i, key in enumerate(self._keys(doc), 1):
            slots = self._index.setdefault(key, [])
            slots.append(start + i)
            if len(slots) > cap:
                del slots[0]
        while len(self._toks) > self.capacity:
            self._evict()

    def _evict(self) -> None:
        start, size = self._docs.popleft()
        doc = self._toks[:size]
        self._base += size
        for key in set(self._keys(doc)):
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
        """The token at a global position (SEP outside the pool)."""
        i = pos - self._base
        return self._toks[i] if 0 <= i < len(self._toks) else SEP

    def matches(self, context: Sequence[int]) -> tuple[int, list[int]]:
        """(longest match, the positions that follow each occurrence matching that long);
        a context starting with SEP matches the starts of outputs."""
        key = tuple(context[-self.cfg.pool_ngram :])
        slots = self._index.get(key) if key else None
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

    def continuation(self, found: list[int], limit: int) -> tuple[list[int], list[float], int]:
        """Tokens that follow the occurrences, each the most frequent next one among those
        that agreed so far, with that frequency, until no occurrence goes on or the share
        falls under `pool_min_share`; and the occurrence copied (the most recent that agreed
        throughout)."""
        live, toks, shares = list(found), list[int](), list[float]()
        floor = self.cfg.pool_min_share
        while len(toks) < limit and len(live) > 1:
            j = len(toks)
            nxt = [self.at(p + j) for p in live]
            counts = Counter(t for t in nxt if t != SEP)
            if not counts:
                break
            # Ties go to the most recent occurrence: the last output is likeliest repeated.
            top = max(counts.values())
            if top / len(live) < floor:
                break
            tok = next(t for t in reversed(nxt) if counts.get(t) == top)
            toks.append(tok)
            shares.append(top / len(live))
            live = [p for p, t in zip(live, nxt, strict=True) if t == tok]
        origin = live[-1] if live else -1
        if len(live) == 1:  # one occurrence left: copy it, up to its output's end
            i = origin + len(toks) - self._base
            run = self._toks[i : i + limit - len(toks)] if 0 <= i < len(self._toks) else []
            if SEP in run:  # look no further than the draft can use
                run = run[: run.index(SEP)]
            toks += run
            shares += [1.0] * len(run)
        return toks, shares, origin

    def find(self, key: Sequence[int], lo: int, hi: int) -> int:
        """The first position p in [lo, hi) whose preceding tokens are `key` (-1: none)."""
        n, want = len(key), list(key)
        for p in range(max(lo, self._base + n), min(hi, self._base + len(self._toks))):
            i = p - self._base
            if self._toks[i - n : i] == want:
                return p
        return -1


class PoolDrafter:
    """Drafts from an `OutputPool`; its features name how the draft was found (a fresh match
    by length, `start` of an answer, `a`: going on after a draft taken whole, `r`: picking up
    after a rejection) and the request kind (apply or chat), so the controller learns each
    apart."""

    name = "pool"

    def __init__(self, pool: OutputPool) -> None:
        self.pool = pool
        self._kind = "chat"
        self._n_prompt = 0
        self._origin = -1  # where the last draft was copied from
        self._align = -1  # where the copy goes on if the last draft was taken whole
        self._resync: tuple[int, int] = (-1, 0)  # (rejected position, output length then)

    def begin(
        self, prompt: Sequence[int], references: Sequence[Reference], rng: np.random.Generator
    ) -> None:
        # References come with apply requests; free prompts and chats have none.
        self._kind = "apply" if references else "chat"
        self._n_prompt = len(prompt)
        self._origin = self._align = -1
        self._resync = (-1, 0)

    def propose(self, context: Sequence[int], max_len: int) -> Draft:
        if max_len <= 0:
            return EMPTY
        n_out = len(context) - self._n_prompt
        lim = self.pool.cfg.pool_match_max
        # Only the output's tail can match (copying the whole output would cost every step).
        ctx = ([SEP] if n_out < lim else []) + list(context[len(context) - min(n_out, lim) :])
        if self._resync[0] >= 0 and self._resync[1] < 0:
            # The first proposal after a rejection: the output now ends with the target's token.
            self._resync = (self._resync[0], n_out - 1)
        found, how = self._follow(ctx, n_out)
        if found < 0:
            length, occ = self.pool.matches(ctx)
            if length < min(self.pool.cfg.pool_ngram, len(ctx)):
                return EMPTY
            how = "start" if length == len(ctx) and ctx[0] == SEP else length_bucket(length)
            toks, conf, self._origin = self.pool.continuation(occ, max_len)
        else:
            toks, conf, self._origin = self.pool.continuation([found], max_len)
        if not toks:
            return EMPTY
        return Draft(
            tokens=toks, source="pool", feature=f"pool-{how}-{self._kind}", confidence=conf
        )

    def _follow(self, ctx: Sequence[int], n_out: int) -> tuple[int, str]:
        """(position, how) to copy from in the occurrence the last draft came from, or -1."""
        if self._align >= 0 and self.pool.at(self._align - 1) == ctx[-1]:
            return self._align, "a"
        q, then = self._resync
        if q < 0 or n_out - then > _RESYNC_WINDOW or len(ctx) < _RESYNC_KEY + 1:
            return -1, ""
        key = ctx[-_RESYNC_KEY:]
        at = self.pool.find(key, q + _RESYNC_KEY, q + _RESYNC_WINDOW + _RESYNC_KEY)
        return (at, "r") if at >= 0 else (-1, "")

    def observe(self, draft: Draft, accepted: int) -> None:
        """Follow the occurrence copied: on after a draft taken whole, near the rejection
        else (the controller keeps the acceptance rates per feature)."""
        self._align = -1
        if draft.source != "pool" or self._origin < 0:
            return
        if accepted >= len(draft):
            # The loop appends one more token: propose() checks it continues the occurrence.
            self._align = self._origin + accepted + 1
            self._resync = (-1, 0)
        else:
            self._resync = (self._origin + accepted, -1)

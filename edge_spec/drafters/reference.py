"""Reference drafter (LLMA / prompt lookup): copy what follows the output's suffix in a reference.

References are the context itself (prompt + output so far, indexed as it grows) and any texts
given, tokenized on their own. Matching is by token n-grams; when the token boundaries of a
reference differ from the model's own (leading spaces, merged newlines), a text-level match
takes over and the continuation is re-tokenized.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from edge_spec.config.settings import ReferenceSettings
from edge_spec.core.types import EMPTY, Draft, Reference
from edge_spec.errors import UserError
from edge_spec.runtimes.base import Runtime

_MAX_CANDIDATES = 32  # most recent occurrences per n-gram: bounds the per-step cost


ReferenceConfig = ReferenceSettings  # the settings tree's reference section


def _streak_bucket(n: int) -> str:
    return "s64" if n >= 64 else ("s8" if n >= 8 else "s0")


def length_bucket(n: int) -> str:
    """The match-length bucket a feature names: le2, le4, le8, le16 or gt16."""
    for edge in (2, 4, 8, 16):
        if n <= edge:
            return f"le{edge}"
    return "gt16"


class ReferenceDrafter:
    """Longest-suffix match of the output in the references, preferring the current alignment."""

    name = "reference"

    def __init__(self, runtime: Runtime, config: ReferenceSettings | None = None) -> None:
        self.rt = runtime
        self.cfg = config or ReferenceSettings()
        self._refs: list[list[int]] = []
        self._cuts: list[list[int]] = []
        self._index: list[dict[tuple[int, ...], list[int]]] = []
        self._texts: list[str] = []
        self._indexed = 0
        self._align: tuple[int, int] | None = None
        self._last: tuple[int, int] | None = None
        # Tokens copied in a row without a rejection: a long streak means a copied stretch,
        # where acceptance is ~1 (it drops at edit points, which end a streak).
        self._streak = 0
        self._text_pos: dict[int, int] = {}
        self._n_prompt = 0
        self._family = "ref-"

    def begin(
        self,
        prompt: Sequence[int],
        references: Sequence[Reference],
        rng: np.random.Generator | None = None,
    ) -> None:
        self._refs = [list(prompt)]
        self._cuts = [[]]
        # With no reference given (a chat or free prompt) every match is in the prompt or the
        # output itself, which an answer rarely copies far: those drafts learn apart from an
        # apply's (`ref-f-`), so neither kind of request misprices the other.
        self._family = "ref-" if references else "ref-f-"
        self._n_prompt = len(prompt)
        self._index = [defaultdict(list)]
        self._indexed = 0
        refs = [Reference.of(r) for r in references]
        self._texts = [self.rt.detokenize(prompt), *(r.text for r in refs)]
        for ref in refs:
            toks = self.rt.tokenize(ref.text, special=False)
            if len(toks) > max(self.rt.n_ctx, self.cfg.max_reference_tokens):
                raise UserError(
                    f"a reference of {len(toks)} tokens is longer than the context "
                    f"window ({self.rt.n_ctx}); pass a smaller reference file"
                )
            self._refs.append(toks)
            self._cuts.append(self._token_cuts(ref, toks))
            self._index.append(self._build(toks, len(toks)))
        self._align = self._last = None
        self._text_pos = {}

    def _build(
        self, toks: Sequence[int], end: int, start: int = 0, index: dict | None = None
    ) -> dict[tuple[int, ...], list[int]]:
        n = self.cfg.ngram_min
        index = defaultdict(list) if index is None else index
        for p in range(max(start, n), end + 1):
            index[tuple(toks[p - n : p])].append(p)
        return index

    def _token_cuts(self, ref: Reference, toks: Sequence[int]) -> list[int]:
        """Token indices of the reference's cut points (character offsets -> tokens)."""
        text, cuts = ref.text, ref.cuts
        if not cuts:
            return []
        starts, pos = [], 0
        for t in toks:
            starts.append(pos)
            pos += len(self.rt.token_bytes(t))
        return sorted({bisect_left(starts, len(text[:c].encode())) for c in cuts})

    def _slice(self, r: int, p: int, limit: int) -> list[int]:
        """Up to `limit` reference tokens from p, ending at the next cut point after p."""
        end = p + limit
        cuts = self._cuts[r]
        if cuts:
            i = bisect_right(cuts, p)
            if i < len(cuts):
                end = min(end, cuts[i])
        return list(self._refs[r][p:end])

    @staticmethod
    def _candidates(positions: list[int], anchor: int) -> list[int]:
        """At most _MAX_CANDIDATES occurrences, those nearest the anchor (the list is sorted)."""
        if len(positions) <= _MAX_CANDIDATES:
            return positions
        i = bisect_left(positions, anchor)
        lo = max(0, min(i - _MAX_CANDIDATES // 2, len(positions) - _MAX_CANDIDATES))
        return positions[lo : lo + _MAX_CANDIDATES]

    def _match_len(self, ref: Sequence[int], p: int, ctx: Sequence[int]) -> int:
        n, lim = 0, min(self.cfg.ngram_max, p, len(ctx))
        while n < lim and ref[p - 1 - n] == ctx[-1 - n]:
            n += 1
        return n

    def propose(self, context: Sequence[int], limit: int) -> Draft:
        if limit <= 0:
            return EMPTY
        if len(context) == self._n_prompt and len(self._refs) > 1:
            # No output yet: the answer most likely starts like the first reference
            # (for apply, the naive merge), whose start no n-gram of the prompt can find.
            self._last = (1, 0)
            return Draft(tokens=self._slice(1, 0, limit), source="reference", feature="ref-start")
        if len(context) < self.cfg.ngram_min:
            return EMPTY
        ctx0 = self._refs[0]
        ctx0.extend(context[len(ctx0) :])  # the context only grows within a request
        # Positions up to len-1 only: the final position is the suffix matching itself.
        self._build(ctx0, len(ctx0) - 1, self._indexed, self._index[0])
        self._indexed = len(ctx0)
        best: tuple[tuple[int, ...], int, int] | None = None
        if self._align is not None:
            r, p = self._align
            ref = self._refs[r]
            if 0 < p < len(ref) and ref[p - 1] == context[-1]:
                best = ((1, self._match_len(ref, p, context), 1, p), r, p)
        key = tuple(context[-self.cfg.ngram_min :])
        # An alignment that still holds outranks every n-gram occurrence: no search then.
        for r, index in enumerate(self._index if best is None else ()):
            ref = self._refs[r]
            same = self._last is not None and self._last[0] == r
            anchor = self._last[1] if same else 0  # type: ignore[index]
            for p in self._candidates(index.get(key, []), anchor):
                if p >= len(ref):
                    continue
                # Longest match first; ties go to the occurrence just after the last alignment
                # (copying moves forward through a file), else to the earliest one.
                near = int(same and p >= anchor)
                score = (0, self._match_len(ref, p, context), near, -abs(p - anchor))
                if best is None or score > best[0]:
                    best = (score, r, p)
        if best is None:
            return self._text_draft(context, limit)
        (aligned, length, _, _), r, p = best
        self._last = (r, p)
        feature = self._family + (
            f"a-{_streak_bucket(self._streak)}" if aligned else f"n-{length_bucket(length)}"
        )
        return Draft(tokens=self._slice(r, p, limit), source="reference", feature=feature)

    def _text_draft(self, context: Sequence[int], limit: int) -> Draft:
        self._last = None
        tail = self.rt.detokenize(context[-12:])
        if "\ufffd" in tail:
            return EMPTY
        for n in (48, 24, self.cfg.text_min_chars):
            probe = tail[-n:]
            if len(probe.strip()) < self.cfg.text_min_chars // 2:
                break
            draft = self._find_text(probe, limit)
            if draft is not None:
                return draft
        return EMPTY

    def _find_text(self, probe: str, limit: int) -> Draft | None:
        for i, text in enumerate(self._texts):
            at = text.find(probe, self._text_pos.get(i, 0))
            if at < 0:
                at = text.find(probe)
            if at < 0:
                continue
            end = at + len(probe)
            self._text_pos[i] = end
            follow = text[end : end + 4 * limit + 16]
            toks = self.rt.tokenize(follow, special=False)[:limit] if follow else []
            if toks:
                return Draft(tokens=toks, source="reference", feature=f"{self._family}text")
        return None

    def observe(self, draft: Draft, accepted: int) -> None:
        if draft.source == "reference" and len(draft):
            self._streak = self._streak + accepted + 1 if accepted == len(draft) else 0
        if self._last is None or draft.source != "reference":
            self._align = None
            return
        r, p = self._last
        # The loop appends one more token after the accepted ones (bonus or correction);
        # propose() checks that it matches the reference before trusting this alignment.
        self._align = (r, p + accepted + 1)

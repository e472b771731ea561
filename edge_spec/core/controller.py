"""Cost-aware draft length: pick k to maximise expected tokens per second.

Expected tokens of a k-token draft: 1 + S(1) + ... + S(k), where S(j) is the chance that the
first j draft tokens are all accepted; its cost is T_verify(k + 1) + T_draft(k). Acceptance in code
apply is not independent per token: it is ~1 through copied stretches and drops at edit points.
So S is estimated as a run-length survival curve (a piecewise-constant hazard over position
bins 1, 2, 3-4, ..., 65-128) per drafter and draft feature (for reference drafts: whether the match
continues the last alignment, and its length), with a geometric prior. A reference draft's
hazard is the same past its first token (an edit point falls anywhere in it), so its bins past
the first share one estimate, with a prior worth `prior_events` rejections. Verify costs start
from the profile's table and are refined online from measured step times (edge_spec.core.costs:
one shared scale, so one slow step does not make its size look worse than the rest). Counts
decay every step and shrink at each new request, so a feature that once did badly is tried
again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from edge_spec.config.settings import ControllerSettings
from edge_spec.core.costs import VerifyCosts
from edge_spec.core.types import EMPTY, Draft, Drafter

# Position bins of the run-length model: draft token j (1-based) falls in the bin containing it.
_BINS: tuple[tuple[int, int], ...] = (
    (1, 1),
    (2, 2),
    (3, 4),
    (5, 8),
    (9, 16),
    (17, 32),
    (33, 64),
    (65, 128),
    (129, 512),
)
_MAX_POS = _BINS[-1][1]
_ZEROS = [0.0] * len(_BINS)
_BIN_IDX = np.asarray(
    [next(b for b, (lo, hi) in enumerate(_BINS) if lo <= j + 1 <= hi) for j in range(_MAX_POS)],
    dtype=np.intp,
)
_KS = np.arange(1, _MAX_POS + 1, dtype=np.float64)
# Features of reference drafts: their hazard does not depend on the position in the draft.
_POOLED = "ref-"
_MIN_HAZARD = 1e-6  # a prior of 1.0 would make the pooled prior's exposure infinite


def _rate_count(draft: Draft, limit: int) -> int:
    """How many leading draft tokens the acceptance model prices (at most `limit`)."""
    n = min(len(draft), limit, _MAX_POS)
    return n if draft.confidence is None else min(n, len(draft.confidence))


class Controller:
    """Chooses which drafter to ask and how much of its draft to verify, from acceptance
    estimates and verify/draft costs."""

    def __init__(self, config: ControllerSettings | None = None) -> None:
        self.cfg = config or ControllerSettings()
        self._costs = VerifyCosts(
            self.cfg.verify_ms,
            min(self.cfg.k_max, _MAX_POS),
            self.cfg.cost_smoothing,
            self.cfg.cost_shape_weight,
            self.cfg.cost_shape_decay,
            self.cfg.cost_size_weight,
        )
        # feature -> (events per bin, exposure per bin): a run-length (survival) model. Stored
        # counts are divided by `_g`, the product of all decay factors so far, so decaying
        # every feature is one multiplication (the true count is stored * _g).
        self._stats: dict[str, tuple[list[float], list[float]]] = {}
        self._g = 1.0
        # source -> drafting cost per token as a fraction of one 1-token verify (smoothed).
        self._draft_ratio: dict[str, float] = {}
        self._idle = 0
        self._skipped: dict[str, int] = {}
        # Per drafter: prefill ms per context token (measured), and whether its cache was
        # brought up to this request's context already (no prefill left to pay).
        self._prefill_ms: dict[str, float] = {}
        self._warm: set[str] = set()

    # ---- cost model -------------------------------------------------------------------
    def verify_ms(self, n: int) -> float:
        """Predicted cost of one target forward over n tokens (never below one token's cost)."""
        return self._costs.ms(n)

    def draft_ratio(self, source: str) -> float:
        """Drafting cost per token relative to a 1-token verify: learned, else the prior."""
        return self._draft_ratio.get(source, self.cfg.draft_cost_ratio.get(source, 0.0))

    def draft_ms(self, source: str, k: int) -> float:
        """Predicted cost of drafting k tokens."""
        return self.draft_ratio(source) * self.verify_ms(1) * k

    # ---- acceptance model ------------------------------------------------------------
    def accept_rate(self, feature: str) -> float:
        """Per-token acceptance in the first position bin (for reports and tests)."""
        return 1.0 - self._hazards(feature)[0]

    def expected_accepted(self, feature: str, k: int) -> float:
        """Expected accepted tokens of a k-token draft with this feature: S(1) + ... + S(k)."""
        draft = Draft(tokens=[0] * k, feature=feature)
        return float(np.cumprod(self._rates(draft, _rate_count(draft, k))).sum())

    def _hazards(self, feature: str) -> list[float]:
        """Per-token rejection hazard in each position bin, shrunk toward the prior."""
        h = 1.0 - self.prior(feature)
        w, g = self.cfg.prior_weight, self._g
        ev, ex = self._stats.get(feature, (_ZEROS, _ZEROS))
        if feature.startswith(_POOLED):
            # A copy breaks where the text was edited, wherever the draft started: one hazard
            # for the first token (a fresh match may be a coincidence: a per-draft chance, with
            # the prior worth `prior_weight` drafts) and one per token for the rest (a rare
            # rate, with the prior worth `prior_events` rejections). Per-bin estimates would let
            # one rejection stall the drafts short of its bin.
            a = self.cfg.prior_events
            first = (ev[0] * g + w * h) / (ex[0] * g + w)
            rest = min(1.0, (sum(ev[1:]) * g + a) / (sum(ex[1:]) * g + a / max(h, _MIN_HAZARD)))
            return [first] + [rest] * (len(ev) - 1)
        # Each bin is shrunk toward the bin before it (the first toward the prior): a bin never
        # drafted into inherits what shorter drafts showed, so good runs extend the next draft.
        out = []
        for e, x in zip(ev, ex, strict=True):
            h = (e * g + w * h) / (x * g + w)
            out.append(h)
        return out

    def prior(self, feature: str) -> float:
        """The configured prior whose name is the longest prefix of `feature`."""
        best, best_len = self.cfg.prior_accept, -1
        for name, value in self.cfg.feature_priors.items():
            if feature.startswith(name) and len(name) > best_len:
                best, best_len = value, len(name)
        return best

    def _rates(self, draft: Draft, n: int) -> np.ndarray:
        """Chance that draft token j is accepted given tokens < j were, for j < n (n at most
        the draft's length, `_MAX_POS`, and its confidences' length)."""
        rates = 1.0 - np.asarray(self._hazards(draft.feature))[_BIN_IDX[:n]]
        if draft.confidence is not None:
            # A model drafter's own confidence sharpens the per-feature rate token by token.
            conf = np.asarray(draft.confidence[:n], dtype=np.float64)
            rates = np.minimum(0.999, 0.5 * rates + 0.5 * conf)
        return rates

    def best_prefix(self, draft: Draft, limit: int) -> tuple[int, float]:
        """(k, expected tokens/ms) maximising throughput over prefixes of the draft.

        One pass of vector arithmetic over every k up to `k_max`: the search runs every step,
        and a Python loop over 128 prefixes would cost more than the rest of the step.
        """
        one = self.verify_ms(1)
        n = _rate_count(draft, min(limit, self.cfg.k_max))
        if n <= 0:
            return 0, 1.0 / one
        expected = 1.0 + np.cumsum(np.cumprod(self._rates(draft, n)))
        cost = self._costs.vector()[2 : n + 2]
        sunk = draft.draft_ms > 0  # already paid: does not depend on k
        per_draft = 0.0 if sunk else self.draft_ms(draft.source, 1)
        if per_draft:
            cost = cost + per_draft * _KS[:n]
        gain = expected / cost
        k = int(np.argmax(gain))
        if gain[k] > 1.0 / one:
            return k + 1, float(gain[k])
        return 0, 1.0 / one

    def choose(self, draft: Draft, limit: int, best: int | None = None) -> int:
        """How many tokens of `draft` to verify (0 = plain decoding this step); `best` is
        `best_prefix`'s k when the caller already has it."""
        if not len(draft) or limit <= 0:
            return 0
        k = self.best_prefix(draft, limit)[0] if best is None else best
        if k == 0:
            self._idle += 1
            if self._idle >= self.cfg.probe_every:  # keep probing: estimates may be stale
                self._idle = 0
                return min(len(draft), limit, 2)
        else:
            self._idle = 0
        return k

    def best_k(self, source: str, limit: int, context_len: int = 0) -> int:
        """Draft length to ask of a costly drafter before seeing its draft (0: do not ask).

        A drafter not yet used in this request must first bring its cache up to the context
        (its prefill, paid once per request): it is asked only when that estimated cost is a
        small share of the decoding left. After `probe_every` refusals in a row it is asked for
        a short probe draft anyway, so a drafter whose cost or acceptance was misjudged once is
        measured again.
        """
        if source not in self._warm and context_len:
            prefill = context_len * self.prefill_ms_per_token(source)
            if prefill > self.cfg.probe_prefill_share * limit * self.verify_ms(1):
                return 0
        probe = Draft(tokens=[0] * min(limit, self.cfg.k_max), source=source, feature=source)
        k = self.best_prefix(probe, limit)[0]
        if k > 0:
            self._skipped[source] = 0
            return k
        self._skipped[source] = self._skipped.get(source, 0) + 1
        if self._skipped[source] >= self.cfg.probe_every:
            self._skipped[source] = 0
            return min(limit, 2)
        return 0

    def prefill_ms_per_token(self, source: str) -> float:
        """A drafter's measured prefill cost per context token, else its per-token draft cost."""
        return self._prefill_ms.get(source, self.draft_ms(source, 1))

    def cheap(self, source: str) -> bool:
        """Whether a drafter costs next to nothing per token (a lookup, not a model)."""
        return self.cfg.draft_cost_ratio.get(source, 0.0) < 0.01

    def budget(self, source: str, limit: int, context_len: int = 0) -> int:
        """How many tokens to ask of drafter `source`: all a cheap one has, a costly one's best."""
        if self.cheap(source):
            return min(limit, self.cfg.k_max)
        return self.best_k(source, limit, context_len)

    def select(
        self, drafters: Sequence[Drafter], context: Sequence[int], limit: int
    ) -> tuple[Draft, int]:
        """Ask the drafters in order: (draft, k) of the one worth verifying.

        This is the hybrid (docs/design.md): among the cheap drafters (lookups: the reference,
        the pool) the draft with the best expected gain, when one pays; else the model drafter
        when its expected gain pays for its cost; else plain decoding. A costly drafter is not
        asked once a cheap draft pays.
        """
        fallback, fallback_k = EMPTY, None
        best: tuple[float, Draft, int] | None = None
        for drafter in drafters:
            if best is not None and not self.cheap(drafter.name):
                break
            n = self.budget(drafter.name, limit, len(context)) if limit > 0 else 0
            if n <= 0:
                continue
            draft = drafter.propose(context, n)
            if not len(draft):
                continue
            k, gain = self.best_prefix(draft, limit)
            if k > 0 and (best is None or gain > best[0]):
                best = (gain, draft, k)
            elif k == 0 and fallback is EMPTY:
                fallback, fallback_k = draft, k
        if best is not None:
            return best[1], self.choose(best[1], limit, best[2])
        return fallback, self.choose(fallback, limit, fallback_k)

    # ---- learning ---------------------------------------------------------------------
    def observe(self, draft: Draft, k: int, accepted: int, verify_ms: float) -> None:
        """Record one verify step of k drafted tokens of which `accepted` were accepted."""
        s = self.cfg.cost_smoothing
        self._costs.observe(k + 1, verify_ms)
        if len(draft) and draft.source != "reference":
            self._warm.add(draft.source)
        if draft.prefill_ms > 0 and draft.prefill_tokens:
            per = draft.prefill_ms / draft.prefill_tokens
            old = self._prefill_ms.get(draft.source, per)
            self._prefill_ms[draft.source] = old + s * (per - old)
        per_token = draft.draft_ms - draft.prefill_ms
        if len(draft) and per_token > 0:
            # Smoothed from the prior, never replaced by one sample; the drafter's own prefill
            # (once per request) is not a per-token cost.
            measured = per_token / len(draft) / max(self.verify_ms(1), 1e-6)
            old = self.draft_ratio(draft.source)
            self._draft_ratio[draft.source] = old + s * (measured - old)
        self.forget(self.cfg.decay)
        if k == 0:
            return
        g = self._g
        ev, ex = self._stats.setdefault(draft.feature, ([0.0] * len(_BINS), [0.0] * len(_BINS)))
        for b, (lo, hi) in enumerate(_BINS):
            if lo > accepted + 1:
                break
            # Tokens 1..accepted survived; token accepted + 1 (if drafted) was the rejection.
            ex[b] += max(0, min(accepted, hi) - lo + 1) / g
            if accepted < k and lo <= accepted + 1 <= hi:
                ex[b] += 1.0 / g
                ev[b] += 1.0 / g

    def forget(self, factor: float) -> None:
        """Scale all acceptance counts by `factor` (every step; more at a new request)."""
        self._g *= factor
        if self._g < 1e-200 or factor == 0.0:  # fold the factor in before it underflows
            for ev, ex in self._stats.values():
                for i in range(len(ev)):
                    ev[i] *= self._g
                    ex[i] *= self._g
            self._g = 1.0

    def new_request(self) -> None:
        """A new request copies other text: keep the shape of what was learned, not its weight.

        Learned drafting costs move back toward their priors the same way, so one slow sample
        (a cold cache, a busy machine) does not rule a drafter out for the engine's life.
        """
        self.forget(self.cfg.request_decay)
        w = self.cfg.request_decay
        for source, ratio in self._draft_ratio.items():
            prior = self.cfg.draft_cost_ratio.get(source, ratio)
            self._draft_ratio[source] = prior + w * (ratio - prior)
        self._skipped.clear()
        self._warm.clear()


class Policy(Protocol):
    """What the loop asks of a controller."""

    def select(
        self, drafters: Sequence[Drafter], context: Sequence[int], limit: int
    ) -> tuple[Draft, int]: ...

    def observe(self, draft: Draft, k: int, accepted: int, verify_ms: float) -> None: ...

    def new_request(self) -> None: ...


class FixedK:
    """A controller that always drafts `k` tokens (for comparisons); still learns costs."""

    def __init__(self, k: int, inner: Policy) -> None:
        self.k = k
        self.inner = inner

    def choose(self, draft: Draft, limit: int) -> int:
        return min(self.k, len(draft), max(limit, 0))

    def budget(self, source: str, limit: int, context_len: int = 0) -> int:
        return min(self.k, limit)

    def best_k(self, source: str, limit: int, context_len: int = 0) -> int:
        return min(self.k, limit)

    def select(
        self, drafters: Sequence[Drafter], context: Sequence[int], limit: int
    ) -> tuple[Draft, int]:
        for drafter in drafters:
            draft = drafter.propose(context, min(self.k, limit)) if limit > 0 else EMPTY
            if len(draft):
                return draft, self.choose(draft, limit)
        return EMPTY, 0

    def observe(self, draft: Draft, k: int, accepted: int, verify_ms: float) -> None:
        self.inner.observe(draft, k, accepted, verify_ms)

    def new_request(self) -> None:
        self.inner.new_request()

"""Cost-aware draft length: pick k to maximise expected tokens per second.

Expected tokens of a k-token draft: 1 + S(1) + ... + S(k), where S(j) is the chance that the
first j draft tokens are all accepted; its cost is T_verify(k + 1) + T_draft(k). Acceptance in code
apply is not independent per token: it is ~1 through copied stretches and drops at edit points.
So S is estimated as a run-length survival curve (a piecewise-constant hazard over position
bins 1, 2, 3-4, ..., 65-128) per drafter and draft feature (for reference drafts: whether the match
continues the last alignment, and its length), with a geometric prior. Verify costs start from
the profile's table and are refined online from measured step times. Counts decay every step
and shrink at each new request, so a feature that once did badly is tried again.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field

from edge_spec.drafters.base import Draft

# One verify step (logits on every row) of the 1.5B demo target on the 2-core dev CPU, in ms:
# `edge-spec calibrate` on 2026-11-29 (profiles/cpu-2core.toml). Only the shape matters as a
# prior: the controller rescales it from measured step times.
CPU_2CORE_VERIFY_MS: dict[int, float] = {
    1: 45.8, 2: 87.3, 4: 144.2, 8: 333.6, 16: 440.8, 32: 782.2, 64: 1535.8, 128: 2800.4,
}


@dataclass(frozen=True)
class ControllerConfig:
    """Bounds, smoothing and the prior cost table of the draft-length controller."""

    k_max: int = 128
    prior_accept: float = 0.7
    # Priors per draft feature (prefix match): an aligned copy of a reference is nearly always
    # right in code apply, a 2-token coincidence much less so. Learned estimates replace them.
    feature_priors: Mapping[str, float] = field(default_factory=lambda: {
        "ref-start": 0.9, "ref-a": 0.95, "ref-n-gt16": 0.9, "ref-n-le16": 0.85,
        "ref-n-le8": 0.8, "ref-n-le4": 0.7, "ref-n-le2": 0.5, "ref-text": 0.6, "model": 0.7,
    })
    prior_weight: float = 4.0
    decay: float = 0.98
    request_decay: float = 0.1
    cost_smoothing: float = 0.3
    probe_every: int = 24
    verify_ms: Mapping[int, float] = field(default_factory=lambda: dict(CPU_2CORE_VERIFY_MS))
    # Drafting cost per token relative to one target forward of one token, until measured.
    # 0.53: the 0.5B demo drafter against the 1.5B target on the dev CPU (calibrated).
    draft_cost_ratio: Mapping[str, float] = field(
        default_factory=lambda: {"reference": 0.001, "model": 0.53}
    )


# Position bins of the run-length model: draft token j (1-based) falls in the bin containing it.
_BINS: tuple[tuple[int, int], ...] = ((1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32),
                                      (33, 64), (65, 128), (129, 512))
_MAX_POS = _BINS[-1][1]
_BIN = [next(b for b, (lo, hi) in enumerate(_BINS) if lo <= j + 1 <= hi) for j in range(_MAX_POS)]
_ZEROS = [0.0] * len(_BINS)


class Controller:
    """Chooses draft lengths from acceptance estimates and verify/draft costs."""

    def __init__(self, config: ControllerConfig | None = None) -> None:
        self.cfg = config or ControllerConfig()
        self._table = sorted(self.cfg.verify_ms.items())
        self._measured: dict[int, float] = {}
        self._scale = 1.0
        # feature -> (events per bin, exposure per bin): a run-length (survival) model.
        self._stats: dict[str, tuple[list[float], list[float]]] = {}
        self._draft_ms: dict[str, float] = {}
        self._idle = 0

    # ---- cost model -------------------------------------------------------------------
    def _table_ms(self, n: int) -> float:
        xs = [x for x, _ in self._table]
        i = bisect_left(xs, n)
        if i < len(xs) and xs[i] == n:
            return self._table[i][1]
        if i == 0:
            return self._table[0][1] * n / xs[0]
        if i == len(xs):
            (x0, y0), (x1, y1) = self._table[-2], self._table[-1]
            return y1 + (y1 - y0) / (x1 - x0) * (n - x1)
        (x0, y0), (x1, y1) = self._table[i - 1], self._table[i]
        return y0 + (y1 - y0) * (n - x0) / (x1 - x0)

    def verify_ms(self, n: int) -> float:
        """Predicted cost of one target forward over n tokens (never below one token's cost)."""
        own = self._measured.get(n, self._table_ms(n) * self._scale)
        if n == 1:
            return own
        return max(own, self._measured.get(1, self._table_ms(1) * self._scale))

    def draft_ms(self, source: str, k: int) -> float:
        """Predicted cost of drafting k tokens: measured per-token cost, else the prior ratio."""
        per = self._draft_ms.get(source)
        if per is None:
            per = self.cfg.draft_cost_ratio.get(source, 0.0) * self.verify_ms(1)
        return per * k

    # ---- acceptance model ------------------------------------------------------------
    def accept_rate(self, feature: str) -> float:
        """Per-token acceptance in the first position bin (for reports and tests)."""
        return 1.0 - self._hazards(feature)[0]

    def expected_accepted(self, feature: str, k: int) -> float:
        """Expected accepted tokens of a k-token draft with this feature: S(1) + ... + S(k)."""
        total, run = 0.0, 1.0
        for r in self._rates(Draft(tokens=[0] * k, feature=feature)):
            run *= r
            total += run
        return total

    def _hazards(self, feature: str) -> list[float]:
        """Per-token rejection hazard in each position bin, shrunk toward the prior."""
        # Each bin is shrunk toward the bin before it (the first toward the prior): a bin never
        # drafted into inherits what shorter drafts showed, so good runs extend the next draft.
        h = 1.0 - self.prior(feature)
        w = self.cfg.prior_weight
        ev, ex = self._stats.get(feature, (_ZEROS, _ZEROS))
        out = []
        for e, x in zip(ev, ex, strict=True):
            h = (e + w * h) / (x + w)
            out.append(h)
        return out

    def prior(self, feature: str) -> float:
        """The configured prior whose name is the longest prefix of `feature`."""
        best, best_len = self.cfg.prior_accept, -1
        for name, value in self.cfg.feature_priors.items():
            if feature.startswith(name) and len(name) > best_len:
                best, best_len = value, len(name)
        return best

    def _rates(self, draft: Draft) -> list[float]:
        """Chance that draft token j is accepted given tokens < j were, for each j."""
        hz = self._hazards(draft.feature)
        rates = [1.0 - hz[_BIN[j]] for j in range(min(len(draft), _MAX_POS))]
        if draft.confidence is not None:
            # A model drafter's own confidence sharpens the per-feature rate token by token.
            rates = [min(0.999, 0.5 * a + 0.5 * c) for a, c in zip(rates, draft.confidence, strict=False)]
        return rates

    def best_prefix(self, draft: Draft, limit: int) -> tuple[int, float]:
        """(k, expected tokens/ms) maximising throughput over prefixes of the draft."""
        rates = self._rates(draft)
        best_k, best = 0, 1.0 / self.verify_ms(1)
        expected, run = 1.0, 1.0
        sunk = draft.draft_ms  # already paid: does not depend on k
        for k in range(1, min(len(draft), limit, self.cfg.k_max) + 1):
            run *= rates[k - 1]
            expected += run
            cost = self.verify_ms(k + 1) + (0.0 if sunk else self.draft_ms(draft.source, k))
            if expected / cost > best:
                best_k, best = k, expected / cost
        return best_k, best

    def choose(self, draft: Draft, limit: int) -> int:
        """How many tokens of `draft` to verify (0 = plain decoding this step)."""
        if not len(draft) or limit <= 0:
            return 0
        k, _ = self.best_prefix(draft, limit)
        if k == 0:
            self._idle += 1
            if self._idle >= self.cfg.probe_every:  # keep probing: estimates may be stale
                self._idle = 0
                return min(len(draft), limit, 2)
        else:
            self._idle = 0
        return k

    def pays(self, draft: Draft, limit: int) -> bool:
        return self.best_prefix(draft, limit)[0] > 0

    def best_k(self, source: str, limit: int) -> int:
        """Draft length to ask of a costly drafter before seeing its draft."""
        probe = Draft(tokens=[0] * min(limit, self.cfg.k_max), source=source, feature=source)
        return self.best_prefix(probe, limit)[0]

    # ---- learning ---------------------------------------------------------------------
    def observe(self, draft: Draft, k: int, accepted: int, verify_ms: float) -> None:
        """Record one verify step of k drafted tokens of which `accepted` were accepted."""
        s = self.cfg.cost_smoothing
        n = k + 1
        prior = self.verify_ms(n)
        self._measured[n] = prior + s * (verify_ms - prior)
        ratio = verify_ms / max(self._table_ms(n), 1e-6)
        self._scale += s * 0.25 * (ratio - self._scale)
        if k and draft.draft_ms:
            per = draft.draft_ms / len(draft)
            old = self._draft_ms.get(draft.source, per)
            # A per-token cost includes syncing the drafter's cache; smooth it like verify costs.
            self._draft_ms[draft.source] = old + s * (per - old)
        self.forget(self.cfg.decay)
        if k == 0:
            return
        ev, ex = self._stats.setdefault(draft.feature, ([0.0] * len(_BINS), [0.0] * len(_BINS)))
        for b, (lo, hi) in enumerate(_BINS):
            # Tokens 1..accepted survived; token accepted + 1 (if drafted) was the rejection.
            ex[b] += max(0, min(accepted, hi) - lo + 1)
            if accepted < k and lo <= accepted + 1 <= hi:
                ex[b] += 1.0
                ev[b] += 1.0

    def forget(self, factor: float) -> None:
        """Scale all acceptance counts by `factor` (every step; more at a new request)."""
        for ev, ex in self._stats.values():
            for i in range(len(ev)):
                ev[i] *= factor
                ex[i] *= factor

    def new_request(self) -> None:
        """A new request copies other text: keep the shape of what was learned, not its weight."""
        self.forget(self.cfg.request_decay)


class FixedK:
    """A controller that always drafts `k` tokens (for comparisons); still learns costs."""

    def __init__(self, k: int, inner: Controller) -> None:
        self.k = k
        self.inner = inner

    def choose(self, draft: Draft, limit: int) -> int:
        return min(self.k, len(draft), max(limit, 0))

    def pays(self, draft: Draft, limit: int) -> bool:
        return self.k > 0

    def best_k(self, source: str, limit: int) -> int:
        return min(self.k, limit)

    def observe(self, draft: Draft, k: int, accepted: int, verify_ms: float) -> None:
        self.inner.observe(draft, k, accepted, verify_ms)

    def new_request(self) -> None:
        self.inner.new_request()

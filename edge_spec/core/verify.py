"""Verification of a draft against the target's logits: greedy and lossless rejection sampling.

Greedy accepts while the target's argmax equals the draft; stochastic follows Leviathan et al.
(accept with min(1, p/q), resample from the residual max(p - q, 0)), so the output distribution
is exactly the target's. A draft without probabilities (reference drafts, greedy model drafts)
is a deterministic proposal: q is one-hot.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edge_spec.config.settings import SamplingSettings

SamplingConfig = SamplingSettings  # the settings tree's sampling section


def target_probs(logits: np.ndarray, cfg: SamplingConfig) -> np.ndarray:
    """Softmax of one logits row after temperature, top-k and top-p (float64, sums to 1)."""
    x = logits.astype(np.float64) / cfg.temperature
    if 0 < cfg.top_k < x.size:
        kth = np.partition(x, -cfg.top_k)[-cfg.top_k]
        x = np.where(x < kth, -np.inf, x)
    x -= x.max()
    p = np.exp(x)
    p /= p.sum()
    if cfg.top_p < 1.0:
        order = np.argsort(-p, kind="stable")
        csum = np.cumsum(p[order])
        # Keep the smallest prefix whose mass reaches top_p (always at least one token).
        cut = int(np.searchsorted(csum, cfg.top_p)) + 1
        mask = np.zeros_like(p, dtype=bool)
        mask[order[:cut]] = True
        p = np.where(mask, p, 0.0)
        p /= p.sum()
    return p


def verify_greedy(logits: np.ndarray, draft: Sequence[int]) -> tuple[int, int]:
    """Return (accepted count, next token) for a greedy draft; `logits` has len(draft)+1 rows."""
    # Row by row: after the first mismatch the remaining rows are never needed.
    n = 0
    while n < len(draft):
        best = int(logits[n].argmax())
        if best != draft[n]:
            return n, best
        n += 1
    return n, int(logits[n].argmax())


def _sample(p: np.ndarray, rng: np.random.Generator) -> int:
    c = np.cumsum(p)
    return int(min(np.searchsorted(c, rng.random() * c[-1], side="right"), p.size - 1))


def verify_stochastic(
    logits: np.ndarray,
    draft: Sequence[int],
    draft_probs: Sequence[np.ndarray] | None,
    cfg: SamplingConfig,
    rng: np.random.Generator,
) -> tuple[int, int]:
    """Rejection-sample a draft; returns (accepted count, next token) distributed as the target."""
    for i, tok in enumerate(draft):
        p = target_probs(logits[i], cfg)
        if draft_probs is None:
            q_tok = 1.0
            residual = p.copy()
            residual[tok] = 0.0
        else:
            q = draft_probs[i]
            q_tok = float(q[tok])
            residual = np.maximum(p - q, 0.0)
        if q_tok > 0 and rng.random() * q_tok < p[tok]:
            continue
        if residual.sum() <= 0:  # p == q exactly: any rejection is measure-zero; fall back to p
            residual = p
        return i, _sample(residual / residual.sum(), rng)
    return len(draft), _sample(target_probs(logits[len(draft)], cfg), rng)

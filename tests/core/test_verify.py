"""Rejection sampling keeps the target's distribution exactly (statistical test)."""

from __future__ import annotations

import numpy as np
import pytest

from edge_spec.core.verify import SamplingConfig, target_probs, verify_greedy, verify_stochastic

V = 10
N = 100_000


def chi_square_p(counts: np.ndarray, probs: np.ndarray) -> float:
    from math import exp, lgamma, log

    expected = probs * counts.sum()
    mask = expected > 0
    assert counts[~mask].sum() == 0, "sampled a token with zero target probability"
    stat = float((((counts - expected) ** 2)[mask] / expected[mask]).sum())
    dof = int(mask.sum()) - 1
    # Survival function of chi2 via the regularized upper incomplete gamma (series), no scipy.
    a, x = dof / 2.0, stat / 2.0
    if x <= 0:
        return 1.0
    term = total = 1.0 / a
    n = 1
    while term > 1e-12 * total and n < 10_000:
        term *= x / (a + n)
        total += term
        n += 1
    lower = exp(-x + a * log(x) - lgamma(a)) * total
    return max(0.0, 1.0 - lower)


def _first_token_counts(logits: np.ndarray, draft_sampler, cfg: SamplingConfig) -> np.ndarray:  # noqa: ANN001
    rng = np.random.default_rng(1234)
    counts = np.zeros(V, dtype=np.int64)
    for _ in range(N):
        toks, probs = draft_sampler(rng)
        n_acc, nxt = verify_stochastic(logits, toks, probs, cfg, rng)
        first = toks[0] if n_acc >= 1 else nxt
        counts[first] += 1
    return counts


@pytest.mark.parametrize("one_hot", [False, True])
def test_rejection_sampling_matches_target(one_hot: bool) -> None:
    rng0 = np.random.default_rng(0)
    logits = rng0.normal(0, 1.5, (3, V)).astype(np.float32)
    cfg = SamplingConfig(temperature=0.8, top_k=0, top_p=1.0, seed=0)
    p = target_probs(logits[0], cfg)
    q = np.roll(np.sort(p), 3)  # a draft distribution quite unlike the target's
    q = q / q.sum()

    def sampler(rng: np.random.Generator):  # noqa: ANN202
        if one_hot:
            return [int(np.argmax(q))], None  # a reference draft: always the same token
        t = int(rng.choice(V, p=q))
        return [t, (t + 1) % V], [q, q]

    counts = _first_token_counts(logits, sampler, cfg)
    pval = chi_square_p(counts, p)
    l1 = float(np.abs(counts / N - p).sum())
    print(f"\n[rejection sampling one_hot={one_hot}] chi2 p={pval:.4f}, L1={l1:.4f}")
    assert pval > 0.001


def test_top_k_top_p_respected() -> None:
    logits = np.arange(V, dtype=np.float32)
    p = target_probs(logits, SamplingConfig(temperature=1.0, top_k=3))
    assert np.count_nonzero(p) == 3 and p.argmax() == V - 1
    p = target_probs(logits, SamplingConfig(temperature=1.0, top_p=0.5))
    assert 0 < np.count_nonzero(p) < V and abs(p.sum() - 1) < 1e-9
    counts = _first_token_counts(
        np.tile(logits, (2, 1)), lambda r: ([0], None), SamplingConfig(temperature=1.0, top_k=3)
    )
    assert counts[: V - 3].sum() == 0


def test_greedy_verify() -> None:
    logits = np.zeros((4, V), dtype=np.float32)
    for i, t in enumerate([3, 5, 7, 9]):
        logits[i, t] = 1.0
    assert verify_greedy(logits, [3, 5, 7]) == (3, 9)
    assert verify_greedy(logits, [3, 6, 7]) == (1, 5)
    assert verify_greedy(logits[:1], []) == (0, 3)

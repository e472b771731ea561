"""Seeded sampling stays exact: the drafter and the verifier draw from independent streams.

A seed per run, a fake target and a sharp fake drafter whose distribution differs from the
target's; over thousands of seeds the first and second output tokens must follow the target's
distribution (chi-square). Sharing one stream between drafter and verifier fails this check:
the last test shows that the check catches exactly that bug.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest

from edge_spec.config.settings import SamplingSettings
from edge_spec.core import loop
from edge_spec.core.controller import Controller
from edge_spec.core.loop import GenConfig, generate
from edge_spec.drafters.model import ModelDrafter
from edge_spec.runtimes.fake import FakeRuntime

A, B, C = 10, 11, 12
TOKENS = (A, B, C)
# The target: p(first) and p(second | first).
P_FIRST = (0.6, 0.3, 0.1)
P_NEXT = {A: (0.2, 0.5, 0.3), B: (0.7, 0.2, 0.1), C: (0.1, 0.1, 0.8)}
Q = (0.05, 0.15, 0.8)  # the drafter: sharp, and far from the target
PROMPT = [0, 5, 6, 7]
N_SEEDS = 4000
CHI2_CRIT_DF2 = 13.82  # chi-square, 2 degrees of freedom, alpha = 0.001


class TableRuntime(FakeRuntime):
    """A fake whose next-token distribution is a fixed table keyed by the last token."""

    def __init__(self, table: dict[int | None, Sequence[float]]) -> None:
        super().__init__(n_ctx=64)
        self.table = table

    def _logits_for(self, ctx: Sequence[int]) -> np.ndarray:
        probs = self.table.get(ctx[-1], self.table[None])
        logits = np.full(self.n_vocab, -1e9, dtype=np.float32)
        logits[list(TOKENS)] = np.log(np.asarray(probs, dtype=np.float64))
        return logits


def _runs(n: int) -> list[list[int]]:
    target = TableRuntime({None: P_FIRST, **P_NEXT})
    drafter_rt = TableRuntime({None: Q})
    sampling = SamplingSettings(temperature=1.0)
    outs = []
    for seed in range(n):
        cfg = GenConfig(
            max_tokens=2, sampling=SamplingSettings(temperature=1.0, seed=seed), fixed_k=1
        )
        drafter = ModelDrafter(drafter_rt, sampling, p_min=0.0)
        res = generate(target, PROMPT, [drafter], Controller(), cfg)
        outs.append(res.tokens)
    return outs


def _chi2(counts: Counter[int], probs: Sequence[float], n: int) -> float:
    return sum((counts[t] - n * p) ** 2 / (n * p) for t, p in zip(TOKENS, probs, strict=True))


def _stats(outs: list[list[int]]) -> tuple[float, float]:
    n = len(outs)
    first = Counter(o[0] for o in outs)
    second = Counter(o[1] for o in outs)
    marginal = [
        sum(P_FIRST[i] * P_NEXT[t][j] for i, t in enumerate(TOKENS)) for j in range(len(TOKENS))
    ]
    return _chi2(first, P_FIRST, n), _chi2(second, marginal, n)


def test_seeded_speculative_sampling_has_the_target_distribution() -> None:
    outs = _runs(N_SEEDS)
    assert all(len(o) == 2 for o in outs)
    chi_first, chi_second = _stats(outs)
    assert chi_first < CHI2_CRIT_DF2, chi_first
    assert chi_second < CHI2_CRIT_DF2, chi_second


def test_same_seed_same_output() -> None:
    assert _runs(50) == _runs(50)


def test_the_check_catches_a_shared_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    def shared(seed: int | None) -> tuple[np.random.Generator, np.random.Generator]:
        return np.random.default_rng(seed), np.random.default_rng(seed)  # the old bug

    monkeypatch.setattr(loop, "request_rngs", shared)
    chi_first, _ = _stats(_runs(N_SEEDS))
    assert chi_first > CHI2_CRIT_DF2, chi_first


def test_stochastic_confidence_is_the_drafted_tokens_probability() -> None:
    rt = TableRuntime({None: Q})
    d = ModelDrafter(rt, SamplingSettings(temperature=1.0), p_min=0.0)
    d.begin(PROMPT, [], np.random.default_rng(3))
    draft = d.propose(PROMPT, 6)
    assert draft.probs is not None
    for tok, conf, q in zip(draft.tokens, draft.confidence or [], draft.probs, strict=True):
        assert conf == pytest.approx(float(q[tok]))

"""The near-tie check behind every "≠ plain" the benchmark reports."""

from __future__ import annotations

import numpy as np
import pytest

from edge_spec.apply.guard.lines import LineContext
from edge_spec.bench.neartie import divergence, first_difference
from edge_spec.runtimes.fake import FakeRuntime


def _greedy(rt: FakeRuntime, prompt: list[int], n: int) -> list[int]:
    rt.truncate(0)
    out: list[int] = []
    logits = rt.eval(prompt)[0]
    for _ in range(n):
        out.append(int(np.argmax(logits)))
        logits = rt.eval([out[-1]])[0]
    return out


def test_first_difference() -> None:
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2


def test_exact_runtime_divergence_is_not_a_near_tie() -> None:
    rt = FakeRuntime(follow="def add(a, b):\n    return a + b\n", seed=3)
    prompt = rt.tokenize("def add(")
    plain = _greedy(rt, prompt, 20)
    assert divergence(rt, prompt, plain, plain) is None
    spec = list(plain)
    spec[5] = (spec[5] + 1) % rt.n_vocab
    d = divergence(rt, prompt, plain, spec)
    assert d is not None and d.position == 5 and d.spec_token == spec[5]
    assert d.noise == 0.0  # the fake model is batch-invariant
    assert d.top2_gap > 0 and not d.near_tie
    assert d.to_dict()["near_tie"] is False


@pytest.mark.real
def test_real_runtime_reports_gap_and_noise(smollm2_rt) -> None:  # noqa: ANN001
    rt = smollm2_rt
    prompt = rt.tokenize("def fibonacci(n):\n", add_bos=False)
    rt.truncate(0)
    plain = _greedy(rt, prompt, 24)
    spec = list(plain)
    spec[10] = plain[10] + 1
    d = divergence(rt, prompt, plain, spec)
    assert d is not None and d.position == 10
    assert d.top2_gap >= 0 and d.noise >= 0


class _BanOne(LineContext):
    """A guard stand-in that bans one token on every line."""

    def __init__(self, tok: int) -> None:
        self.ids = np.asarray([tok], dtype=np.int64)

    def banned(self, line: bytes) -> np.ndarray:  # noqa: ARG002 - the same ban on every line
        return self.ids


def test_the_gap_is_taken_over_the_tokens_the_guard_allows() -> None:
    rt = FakeRuntime(follow="def add(a, b):\n    return a + b\n", seed=3)
    prompt = rt.tokenize("def add(")
    plain = _greedy(rt, prompt, 8)
    rt.truncate(0)
    row = rt.eval(list(prompt) + plain[:5])[0].copy()
    t0, t1, t2 = (int(t) for t in np.argsort(row)[::-1][:3])
    guarded, spec = plain[:5] + [t1], plain[:5] + [t2]
    d = divergence(rt, prompt, guarded, spec, guard=_BanOne(t0))
    assert d is not None and not d.spec_banned
    # The banned favourite t0 is no candidate: the gap is t1's lead over t2, not t0's over t1.
    assert d.top2_gap == pytest.approx(float(row[t1] - row[t2]), abs=1e-3)
    d = divergence(rt, prompt, guarded, plain[:5] + [t0], guard=_BanOne(t0))
    assert d is not None and d.spec_banned and not d.near_tie

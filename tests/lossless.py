"""Checking greedy losslessness on a real runtime: identical, or a proven numeric near-tie."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edge_spec.bench.neartie import Divergence, first_difference


def batch_noise(rt, prompt: Sequence[int], out: Sequence[int], windows=(8, 32, 64)) -> float:  # noqa: ANN001
    """Max |logit| difference between one-token and windowed evaluation of the same tokens."""
    seq = list(prompt) + list(out)
    n0 = len(prompt) - 1
    rt.truncate(0)
    rt.eval(seq[:n0], rows=[])
    single = np.stack([rt.eval([t])[0].copy() for t in seq[n0:]])
    worst = 0.0
    for w in windows:
        rt.truncate(n0)
        rows = []
        for i in range(n0, len(seq), w):
            chunk = seq[i : i + w]
            rows.append(rt.eval(chunk, rows=range(len(chunk))).copy())
        worst = max(worst, float(np.abs(np.concatenate(rows) - single).max()))
    return worst


def first_divergence(
    rt,
    prompt: Sequence[int],
    plain: Sequence[int],  # noqa: ANN001
    spec: Sequence[int],
    noise: float,
) -> Divergence | None:
    """Where spec and plain first differ, with the target's top-2 gap there (one-token eval)."""
    i = first_difference(plain, spec)
    if i is None:
        return None
    seq = list(prompt) + list(plain[:i])
    rt.truncate(0)
    row = rt.eval(seq)[0]
    top = np.sort(row)[-2:]
    pt = plain[i] if i < len(plain) else -1
    st = spec[i] if i < len(spec) else -1
    return Divergence(i, pt, st, float(top[1] - top[0]), noise)


def assert_same_or_near_tie(
    rt,
    prompt: Sequence[int],
    plain_text: str,
    spec_text: str,  # noqa: ANN001
    what: str = "",
) -> Divergence | None:
    """Speculative text equals plain text, or they part at a proven near-tie (reported)."""
    if plain_text == spec_text:
        return None
    plain = rt.tokenize(plain_text, special=False)
    spec = rt.tokenize(spec_text, special=False)
    noise = batch_noise(rt, prompt, plain)
    d = first_divergence(rt, prompt, plain, spec, noise)
    assert d is not None and d.near_tie, (what, d, plain_text[:200], spec_text[:200])
    print(
        f"\n[near-tie] {what}: token {d.position}, top-2 gap {d.top2_gap:.3f} <= noise {noise:.3f}"
    )
    return d

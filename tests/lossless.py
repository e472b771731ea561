"""Checking greedy losslessness on a real runtime: identical, or a proven numeric near-tie."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edge_spec.neartie import Divergence, first_difference


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
            chunk = seq[i:i + w]
            rows.append(rt.eval(chunk, rows=range(len(chunk))).copy())
        worst = max(worst, float(np.abs(np.concatenate(rows) - single).max()))
    return worst


def first_divergence(rt, prompt: Sequence[int], plain: Sequence[int],  # noqa: ANN001
                     spec: Sequence[int], noise: float) -> Divergence | None:
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

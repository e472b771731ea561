"""Is a greedy divergence from plain decoding a numeric near-tie? The check behind every "≠ plain".

Batched and one-token forwards of quantized kernels round differently, so a verify window can
flip an argmax where the target's top two logits are closer than that rounding noise. A
divergence is a near-tie when the top-2 gap at the first differing position (one-token
evaluation, the way plain decoding saw it) is at most the batch-vs-single noise measured around
that position; anything else is a bug. The guard is part of the target, so the gap is taken
over the tokens it allows there (a banned favourite is no candidate), and a divergence to a
token the guard bans is never a tie.

Example: `d = divergence(engine.target, prompt, plain_tokens, spec_tokens)`
Example: `d.near_tie, d.top2_gap, d.noise`
(True, 0.19, 1.27)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from edge_spec.core.guard import Guard, guard_state
from edge_spec.runtimes.base import Runtime, mask_row
from edge_spec.runtimes.prefix import sync_prefix


@dataclass(frozen=True)
class Divergence:
    """Where two greedy outputs first differ, and whether the target was tied there."""

    position: int
    plain_token: int
    spec_token: int
    top2_gap: float
    noise: float
    spec_banned: bool = False  # the guard forbids the speculative token there: a bug

    @property
    def near_tie(self) -> bool:
        return self.top2_gap <= self.noise and not self.spec_banned

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "near_tie": self.near_tie}


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first differing token (or the shorter length); None if equal."""
    i = next((j for j, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if i is None and len(a) != len(b):
        i = min(len(a), len(b))
    return i


def _advance(rt: Runtime, seq: Sequence[int], n: int) -> None:
    """Make the KV cache hold exactly seq[:n], reusing what it already holds."""
    keep = sync_prefix(rt, seq[:n])
    if keep < n:
        rt.eval(seq[keep:n], rows=[])


def divergence(
    rt: Runtime,
    prompt: Sequence[int],
    plain: Sequence[int],
    spec: Sequence[int],
    radius: int = 16,
    windows: Sequence[int] = (4, 16, 32),
    guard: Guard | None = None,
) -> Divergence | None:
    """The first divergence of `spec` from `plain` with its top-2 gap and local noise; None if equal.

    Noise: max |logit| difference between one-token and windowed evaluation of the plain tokens
    within `radius` of the divergence. The KV prefix the runtime holds is reused, so after a
    bench run of the same prompt this costs a few dozen forwards, not a prefill.
    """
    i = first_difference(plain, spec)
    if i is None:
        return None
    seq = list(prompt) + list(plain)
    at = len(prompt) + i - 1  # the token whose logits chose output token i
    lo = max(0, at - radius)
    hi = min(len(seq), at + radius + 1)
    _advance(rt, seq, lo)
    single = np.stack([rt.eval([t])[0].copy() for t in seq[lo:hi]])
    row = single[at - lo]
    spec_banned = False
    if guard is not None:
        row = row.copy()
        mask_row(row, guard.banned(guard_state(guard, rt, prompt, None, *plain[:i])))
        spec_banned = i < len(spec) and 0 <= spec[i] < row.size and bool(row[spec[i]] == -np.inf)
    top = np.sort(row)[-2:]
    noise = 0.0
    for w in windows:
        rt.truncate(lo)
        for s in range(lo, hi, w):
            chunk = seq[s : min(s + w, hi)]
            got = rt.eval(chunk, rows=range(len(chunk)))
            noise = max(noise, float(np.abs(got - single[s - lo : s - lo + len(chunk)]).max()))
    return Divergence(
        i,
        plain[i] if i < len(plain) else -1,
        spec[i] if i < len(spec) else -1,
        round(float(top[1] - top[0]), 4),
        round(noise, 4),
        spec_banned,
    )

"""The verify-cost curve a recorded run actually paid, and its step-to-step noise.

A replay priced by a profile's table assumes the controller's prior is the truth and that
every step of a size costs the same. Live, neither holds: the machine differs from the one
the profile was measured on, and one size's steps spread widely. Fitting both from the run's
own per-step times lets a replay price policies on the run's world (`world_cost`) with its
noise (`noisy_cost`) while the controller still starts from the profile.
"""

from __future__ import annotations

import math
import statistics
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

_MIN_SAMPLES = 5  # a size with fewer recorded steps says little about its median
_MAD_TO_SD = 1.4826  # a normal's standard deviation from its median absolute deviation


def step_times(records: Iterable[Mapping[str, Any]]) -> dict[int, list[float]]:
    """Forward size (k + 1) -> every recorded verify time of that size, over all records."""
    by: dict[int, list[float]] = defaultdict(list)
    for r in records:
        # Records from before verify times were kept have k but no times: nothing to pair.
        for k, ms in zip(r.get("k_trace") or [], r.get("verify_ms_trace") or [], strict=False):
            if ms and ms > 0:
                by[int(k) + 1].append(float(ms))
    return dict(by)


def fit_costs(
    records: Iterable[Mapping[str, Any]], min_samples: int = _MIN_SAMPLES
) -> tuple[dict[int, float], float]:
    """(median ms per forward size, log-normal sigma of a step around its size's median).

    Sizes with fewer than `min_samples` steps are left out (the table interpolates them);
    sigma pools every kept step's log deviation from its size's median (MAD, so a few
    stalls do not set it). Raises ValueError when no size has enough steps."""
    by = step_times(records)
    table, devs = {}, []
    for n, times in sorted(by.items()):
        if len(times) < min_samples:
            continue
        med = statistics.median(times)
        table[n] = round(med, 2)
        devs.extend(abs(math.log(t / med)) for t in times)
    if not table:
        raise ValueError("no forward size has enough recorded verify times to fit a cost curve")
    return table, round(_MAD_TO_SD * statistics.median(devs), 4)


def noisy_cost(cost: Callable[[int], float], sigma: float, key: str) -> Callable[[int], float]:
    """`cost` times log-normal noise of `sigma`, from a generator seeded by `key`: the same
    case and policy draw the same noise in every replay, and policies do not share draws."""
    if sigma <= 0:
        return cost
    rng = np.random.default_rng(zlib.crc32(key.encode()))

    def priced(n: int) -> float:
        return cost(n) * float(rng.lognormal(0.0, sigma))

    return priced


__all__ = ["fit_costs", "noisy_cost", "step_times"]

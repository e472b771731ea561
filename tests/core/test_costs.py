"""The verify-cost model: noise shared across sizes, scale and shape learned from steps."""

from __future__ import annotations

import numpy as np
import pytest

from edge_spec.config.settings import DEFAULT_VERIFY_MS, ControllerSettings
from edge_spec.core.controller import Controller
from edge_spec.core.costs import VerifyCosts
from edge_spec.core.types import Draft


def _costs(table: dict[int, float] | None = None) -> VerifyCosts:
    cfg = ControllerSettings()  # the shipped smoothing and weights
    return VerifyCosts(
        table or DEFAULT_VERIFY_MS,
        512,
        cfg.cost_smoothing,
        cfg.cost_shape_weight,
        cfg.cost_shape_decay,
        cfg.cost_size_weight,
    )


def test_one_slow_step_does_not_make_its_size_look_worse_than_its_neighbours() -> None:
    c = _costs()
    per_row = {n: c.ms(n) / n for n in (65, 129)}
    assert per_row[129] < per_row[65]
    c.observe(129, 2.0 * c.ms(129))  # a stall: twice the expected time
    # Every multi-token size got dearer together; their order per row stayed the table's.
    assert c.ms(129) / 129 < c.ms(65) / 65
    assert c.ms(65) > 1.2 * per_row[65] * 65


def test_a_machine_slower_than_its_profile_is_learned_for_every_size() -> None:
    c = _costs()
    table = {n: c.table_ms(n) for n in range(1, 300)}
    for _ in range(30):
        c.observe(129, 1.6 * table[129])
        c.observe(1, 2.0 * table[1])
    assert c.ms(1) == pytest.approx(2.0 * table[1], rel=0.01)
    for n in (2, 17, 65, 129, 200):  # sizes never measured move with the one that was
        assert c.ms(n) == pytest.approx(max(1.6 * table[n], 2.0 * table[1]), rel=0.03)


def test_before_any_draft_multi_token_sizes_scale_with_the_one_token_cost() -> None:
    c = _costs()
    t17 = c.table_ms(17)
    for _ in range(20):
        c.observe(1, 1.5 * c.table_ms(1))
    assert c.ms(17) == pytest.approx(1.5 * t17, rel=0.02)


def test_a_profile_of_another_shape_is_bent_toward_the_measured_steps() -> None:
    # A CPU profile (cost grows with every row) on a machine where rows are nearly free.
    c = _costs()
    truth = {n: 40.0 * (1 + 0.01 * n) for n in (9, 33, 129)}
    rng = np.random.default_rng(0)
    for _ in range(100):
        for n, ms in truth.items():
            c.observe(n, ms * float(rng.lognormal(0.0, 0.1)))
    for n, ms in truth.items():
        assert c.ms(n) == pytest.approx(ms, rel=0.2), n
    assert c.ms(129) / 129 < c.ms(33) / 33 < c.ms(9) / 9


def test_noisy_steps_keep_the_longest_draft_chosen() -> None:
    # Steps of the longest draft, each as dear as the table says times log-normal noise: the
    # controller keeps verifying near-full drafts that are always right (a size next to the
    # one just measured may take its place: they cost the same per token, within the noise).
    ctl = Controller(
        ControllerSettings(verify_ms=DEFAULT_VERIFY_MS, feature_priors={"ref-a-s64": 0.999})
    )
    draft = Draft(tokens=list(range(128)), source="reference", feature="ref-a-s64")
    rng = np.random.default_rng(1)
    table = _costs()
    ks = []
    for _ in range(60):
        k = ctl.best_prefix(draft, 1000)[0]
        ks.append(k)
        ctl.observe(draft, k, k, table.ms(k + 1) * 1.5 * float(rng.lognormal(0.0, 0.3)))
    assert min(ks) >= 120, ks


def test_a_size_that_is_faster_on_its_own_is_learned() -> None:
    # Matrix kernels that work in tiles of 16 rows: 16 rows cost less than 15 or 17.
    c = _costs({1: 10.0, 128: 1290.0})
    truth = {15: 150.0, 16: 130.0, 17: 170.0}
    for _ in range(40):
        for n, ms in truth.items():
            c.observe(n, ms)
    assert c.ms(16) < min(c.ms(15), c.ms(17))
    for n, ms in truth.items():
        assert c.ms(n) == pytest.approx(ms, rel=0.06), n


def test_the_one_size_shape_used_per_step_matches_the_whole_vector() -> None:
    # observe() reads one size's shape (its two nodes and its own term) to stay cheap per step;
    # it must equal what vector() prices every size with, or learning drifts from prediction.
    c = _costs()
    rng = np.random.default_rng(0)
    for n in rng.integers(2, 300, size=200):
        c.observe(int(n), c.table_ms(int(n)) * float(rng.lognormal(0.2, 0.3)))
    shape = c._shape()
    own = c._size_sum / (c._size_weight + c._size_w0)
    for n in range(2, 300):
        assert c._curve_at(n) + own[n] == pytest.approx(shape[n], abs=1e-12)

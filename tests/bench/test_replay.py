"""Replay: recorded greedy runs re-run through the real loop on a virtual clock, any policy."""

from __future__ import annotations

import numpy as np
import pytest

from edge_spec.bench.costfit import fit_costs
from edge_spec.bench.replay import (
    ReplayCase,
    World,
    mean_rows,
    replay_all,
    replay_case,
    summarize_replay,
    table_cost,
)
from edge_spec.config.settings import ControllerSettings, EngineConfig
from edge_spec.engine import Engine
from edge_spec.runtimes.fake import FakeRuntime

ORIG = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(12))
UPD = "# ... existing code ...\ndef f7(x):\n    return x * 7\n# ... existing code ...\n"
MERGED = ORIG.replace("return x + 7\n", "return x * 7\n")
TABLE = {1: 45.8, 2: 87.3, 4: 144.2, 8: 333.6, 16: 440.8, 32: 782.2, 64: 1535.8, 128: 2800.4}


def _recorded() -> tuple[FakeRuntime, ReplayCase]:
    rt = FakeRuntime(follow="```\n" + MERGED + "```\n", n_ctx=16384)
    eng = Engine(rt, None, EngineConfig().override(kind="reference"))
    res = eng.apply(ORIG, UPD, engine="model")
    task = {"id": "t0", "original": ORIG, "update": UPD}
    return FakeRuntime(follow="", n_ctx=16384), ReplayCase(
        task, list(res.extra["tokens"]), list(res.extra["prompt"]), res.stats.finish_reason
    )


def test_table_cost_interpolates_and_extrapolates() -> None:
    cost = table_cost(TABLE)
    assert cost(1) == 45.8 and cost(128) == 2800.4
    assert TABLE[8] < cost(12) < TABLE[16]
    assert cost(256) > cost(128)


def test_replay_reproduces_the_output_and_orders_policies() -> None:
    tok, case = _recorded()
    cfg = ControllerSettings(verify_ms=TABLE)
    rows = [replay_case(tok, case, p, cfg) for p in ("fixed-8", "fixed-64", "adaptive", "oracle")]
    assert all(r["same_output"] and r["prompt_matches"] for r in rows), rows
    by = {r["policy"]: r for r in rows}
    assert by["oracle"]["speedup"] >= max(r["speedup"] for r in rows) - 1e-9
    assert by["fixed-64"]["forwards"] < by["fixed-8"]["forwards"]
    # The virtual clock prices every verify step: plain decoding is output tokens x T(1).
    assert by["oracle"]["plain_ms"] == round(len(case.output_ids) * TABLE[1], 1) or by["oracle"][
        "output_tokens"
    ] == len(case.output_ids)
    s = summarize_replay(rows)
    assert s["oracle"]["of_oracle"] == 1.0 and s["adaptive"]["of_oracle"] <= 1.0


def test_replay_all_keeps_one_controller_per_policy_across_cases() -> None:
    tok, case = _recorded()
    # Doubtful priors, so that what the first case teaches shows in the second.
    cfg = ControllerSettings(verify_ms=TABLE, feature_priors={"ref": 0.9})
    cases = [
        case,
        ReplayCase({**case.task, "id": "t1"}, case.output_ids, case.prompt_ids, case.finish_reason),
    ]
    fresh = replay_all(tok, cases, ["adaptive"], cfg, fresh=True)
    kept = replay_all(tok, cases, ["adaptive"], cfg)
    assert all(r["same_output"] for r in fresh + kept)
    # A fresh controller prices both copies of the task alike; a kept one starts the second
    # from what the first taught it (here: copying pays), so it needs no more forwards.
    assert fresh[0]["decode_ms"] == fresh[1]["decode_ms"] == kept[0]["decode_ms"]
    assert kept[1]["forwards"] <= kept[0]["forwards"]
    assert kept[1]["decode_ms"] < kept[0]["decode_ms"]


def test_bench_gives_each_mode_its_own_controller() -> None:
    from edge_spec.bench.bench import RunOptions, bench
    from edge_spec.bench.modes import parse_modes

    rt = FakeRuntime(follow="```\n" + MERGED + "```\n", n_ctx=16384)
    eng = Engine(rt, None, EngineConfig().override(kind="reference"))
    own = eng.controller
    seen: list[tuple[tuple[object, object], int]] = []
    real_apply = eng.apply

    def apply(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        seen.append(((kw.get("draft"), kw.get("fixed_k")), id(eng.controller)))
        return real_apply(*a, **kw)

    eng.apply = apply  # type: ignore[method-assign]
    task = {"id": "t0", "original": ORIG, "update": UPD, "expected": MERGED}
    bench(
        eng,
        [task, {**task, "id": "t1"}],
        parse_modes("spec-adaptive,spec-fixed-8"),
        1,
        RunOptions(),
    )
    by_mode: dict[tuple[object, object], set[int]] = {}
    for k, ctl in seen:
        by_mode.setdefault(k, set()).add(ctl)
    assert len(seen) == 6 and all(len(v) == 1 for v in by_mode.values())  # kept across tasks
    assert len(set().union(*by_mode.values())) == 3  # and never shared between modes
    assert eng.controller is own


def test_a_world_fitted_from_a_run_prices_its_steps_with_their_noise() -> None:
    # Step times of a run on a machine twice as slow as the table, spread around each size.
    rng = np.random.default_rng(3)
    rec = {"k_trace": [], "verify_ms_trace": []}
    for n in (1, 9, 65):
        for _ in range(40):
            rec["k_trace"].append(n - 1)
            rec["verify_ms_trace"].append(2 * table_cost(TABLE)(n) * rng.lognormal(0.0, 0.2))
    table, sigma = fit_costs([rec, {"k_trace": [3], "verify_ms_trace": [1.0]}])
    assert sorted(table) == [1, 9, 65]  # one step of size 4 says nothing
    assert table[65] == pytest.approx(2 * table_cost(TABLE)(65), rel=0.1)
    assert sigma == pytest.approx(0.2, rel=0.25)
    with pytest.raises(ValueError):
        fit_costs([{"k_trace": [3], "verify_ms_trace": [1.0]}])
    tok, case = _recorded()
    cfg = ControllerSettings(verify_ms=TABLE)
    calm = replay_case(tok, case, "fixed-64", cfg, world=World(table))
    noisy = [replay_case(tok, case, "fixed-64", cfg, world=World(table, sigma)) for _ in "ab"]
    assert calm["same_output"] and noisy[0]["same_output"]
    assert noisy[0]["decode_ms"] == noisy[1]["decode_ms"] != calm["decode_ms"]  # seeded per case
    # Plain decoding pays the mean of a noisy step too, so a noise-free policy would tie.
    assert noisy[0]["plain_ms"] > calm["plain_ms"]
    assert replay_case(tok, case, "fixed-64", cfg)["decode_ms"] < calm["decode_ms"]


def test_the_oracle_bounds_every_policy_on_a_tiled_machine() -> None:
    # Step costs of a machine whose kernels are fast at multiples of 16 rows (measured on
    # one): 64 rows cost less than 63 or 65, and less per token than 128. The oracle then
    # verifies the cheapest size per token, not always the whole correct prefix.
    tiled = {
        1: 77.0,
        2: 120.0,
        4: 137.0,
        8: 256.0,
        9: 278.0,
        15: 486.0,
        16: 350.0,
        17: 422.0,
        31: 746.0,
        32: 639.0,
        33: 734.0,
        63: 1310.0,
        64: 1115.0,
        65: 1349.0,
        127: 2639.0,
        128: 2439.0,
        129: 2458.0,
    }
    calibrated = {n: ms for n, ms in tiled.items() if n & (n - 1) == 0}
    tok, case = _recorded()
    cfg = ControllerSettings(verify_ms=calibrated)
    rows = {
        p: replay_case(tok, case, p, cfg, world=World(tiled))
        for p in ("adaptive", "fixed-16", "fixed-63", "fixed-64", "fixed-128", "oracle")
    }
    assert all(r["same_output"] for r in rows.values())
    assert rows["oracle"]["decode_ms"] <= min(r["decode_ms"] for r in rows.values())
    assert rows["fixed-63"]["decode_ms"] < rows["fixed-64"]["decode_ms"]


def test_noise_draws_by_seed_and_their_mean() -> None:
    tok, case = _recorded()
    cfg = ControllerSettings(verify_ms=TABLE)
    draws = [
        replay_all(tok, [case], ["fixed-64", "oracle"], cfg, world=World(TABLE, 0.3, seed))
        for seed in (0, 1, 2)
    ]
    first = replay_case(tok, case, "fixed-64", cfg, world=World(TABLE, 0.3))
    assert draws[0][0]["decode_ms"] == first["decode_ms"]  # seed 0: the draw replays always used
    assert len({d[0]["decode_ms"] for d in draws}) == 3
    mean = mean_rows(draws)
    assert [(r["task_id"], r["policy"]) for r in mean] == [("t0", "fixed-64"), ("t0", "oracle")]
    assert mean[0]["speedup"] == pytest.approx(np.mean([d[0]["speedup"] for d in draws]), abs=1e-3)
    assert mean[0]["same_output"] and summarize_replay(mean)["fixed-64"]["tasks"] == 1
    with pytest.raises(ValueError):
        mean_rows([draws[0], draws[1][::-1]])

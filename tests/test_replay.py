"""Replay: recorded greedy runs re-run through the real loop on a virtual clock, any policy."""

from __future__ import annotations

from edge_spec.bench.replay import ReplayCase, replay_case, summarize_replay, table_cost
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
    return FakeRuntime(follow="", n_ctx=16384), ReplayCase(task, list(res.extra["tokens"]),
                                                           list(res.extra["prompt"]),
                                                           res.stats.finish_reason)


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
    assert by["oracle"]["plain_ms"] == round(len(case.output_ids) * TABLE[1], 1) or \
        by["oracle"]["output_tokens"] == len(case.output_ids)
    s = summarize_replay(rows)
    assert s["oracle"]["of_oracle"] == 1.0 and s["adaptive"]["of_oracle"] <= 1.0

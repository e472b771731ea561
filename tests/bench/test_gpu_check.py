"""benchmarks/gpu_check.py on this CPU: a tiny random Qwen2, the real loop, a valid profile."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from edge_spec.config.profiles import parse_profile
from edge_spec.config.settings import REQUIRED_POINTS

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


def test_runs_from_recorded_steps() -> None:
    gc = _module()
    # Two full steps of 8 then 3 accepted: one run of 9 + 9 + 3 = 21; a plain step: a run of 0.
    assert gc.runs_from_steps([8, 8, 8, 0, 8], [8, 8, 3, 0, 8]) == [21, 0, 8]


def test_replay_prices() -> None:
    gc = _module()
    curve = {1: 10.0, 2: 10.0, 4: 10.0, 8: 11.0, 16: 12.0, 32: 14.0, 64: 18.0, 128: 26.0}
    runs = [200, 0, 50]
    assert gc.fixed_price(runs, curve, 0) == pytest.approx(253 * 10.0)
    # Fixed 16: ceil(201/17) + 1 + ceil(51/17) steps of T(17).
    assert gc.fixed_price(runs, curve, 16) == pytest.approx((12 + 1 + 3) * gc.cost(curve, 17))
    oracle = gc.oracle_price(runs, curve, 127)
    assert oracle <= min(gc.fixed_price(runs, curve, k) for k in (0, 16, 32, 64, 127))
    # A curve that dips: the oracle may draft past a run rather than pay the bump.
    bumpy = {**curve, 1: 30.0}
    assert gc.oracle_price([0], bumpy, 127) == pytest.approx(10.0)


def test_tiny_cpu_run(tmp_path: Path) -> None:
    traces = tmp_path / "traces.json"
    traces.write_text(json.dumps({"tasks": {"copy": [100, 0, 20], "edit": [2, 0, 1]}}))
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        str(SCRIPT),
        "--device",
        "cpu",
        "--tiny",
        "--smoke",
        "--repeats",
        "1",
        "--prefix",
        "64",
        "--prompt-tokens",
        "64",
        "--new-tokens",
        "16",
        "--grid",
        ",".join(map(str, REQUIRED_POINTS)),
        "--traces",
        str(traces),
        "--out",
        str(out),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["ok"]
    spec_runs = [r for r in report["end_to_end"] if r["mode"] != "plain"]
    assert len(spec_runs) == 8
    # fp32 on CPU with the runtime's batch-invariant kernels: identical, no near-ties allowed.
    assert all(r["verdict"] == "identical" for r in spec_runs), spec_runs
    oracle = [r for r in spec_runs if r["scenario"] == "oracle"]
    assert all(r["tokens_per_forward"] > 1 for r in oracle)
    profile_path = Path(report["profile_path"])
    prof = parse_profile(profile_path.read_text(), profile_path)
    assert prof.costs.source == "measured" and prof.runtime.backend == "torch"
    assert set(REQUIRED_POINTS) <= set(prof.costs.verify_ms)
    assert {r["task"] for r in report["replay"]} == {"copy", "edit"}
    for row in report["replay"]:
        assert row["oracle"] >= max(row[f"fixed-{k}"] for k in (16, 32, 64, 128)) - 1e-6

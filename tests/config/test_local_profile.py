"""A profile `edge-spec calibrate` wrote on this machine is used when no profile is named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from edge_spec.cli.main import main
from edge_spec.config.local import BUILTIN_PROFILE, calibrated_here, machine_description
from edge_spec.config.profiles import CostsSection, Profile, user_dir
from edge_spec.config.settings import DEFAULT_VERIFY_MS, DEMO_TARGET, RuntimeSettings
from edge_spec.engine import build_engine
from edge_spec.fsutil import write_text

TABLE = {1: 100.0, 2: 150.0, 4: 200.0, 8: 380.0, 16: 500.0, 32: 900.0, 64: 1600.0, 128: 3000.0}


def write_profile(
    name: str,
    *,
    target: str = DEMO_TARGET,
    machine: str | None = None,
    date: str = "2026-12-03",
    backend: str = "llamacpp",
    source: str = "measured",
    table: dict[int, float] | None = None,
) -> Path:
    costs = CostsSection(
        verify_ms=table or TABLE,
        drafter_ratio=0.4,
        prefill_ms_per_token=20.0,
        source=source,
        machine=machine or machine_description(),
        date=date,
        target=target,
    )
    prof = Profile(name=name, costs=costs, runtime=RuntimeSettings(backend=backend, threads=2))
    path = user_dir() / f"{name}.toml"
    write_text(path, prof.to_toml())
    return path


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EDGE_SPEC_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_calibrated_profile_is_used_when_none_is_named() -> None:
    assert build_engine().profile_label == BUILTIN_PROFILE  # nothing calibrated yet
    path = write_profile("local")
    engine = build_engine()
    assert dict(engine.config.controller.verify_ms) == TABLE
    assert engine.config.runtime.threads == 2
    assert (
        str(path) in engine.profile_label and "calibrated on this machine" in engine.profile_label
    )


def test_only_this_machine_target_backend_and_measured_costs() -> None:
    write_profile("other-machine", machine="Some Other CPU, 64 cores (x86_64, Linux)")
    write_profile("other-target", target="smollm2-135m-instruct-q4_1")
    write_profile("other-backend", backend="ort")
    write_profile("estimated", source="estimated")
    (user_dir() / "broken.toml").write_text("this is [not toml")
    assert calibrated_here(DEMO_TARGET, "llamacpp") is None
    engine = build_engine()
    assert engine.profile_label == BUILTIN_PROFILE
    assert dict(engine.config.controller.verify_ms) == dict(DEFAULT_VERIFY_MS)
    assert calibrated_here("smollm2-135m-instruct-q4_1", "llamacpp") is not None
    assert calibrated_here(DEMO_TARGET, "onnx") is not None  # the backend's other name
    assert calibrated_here(DEMO_TARGET, "llamacpp", n_gpu_layers=-1) is None


def test_newest_calibration_wins_and_a_named_profile_beats_it() -> None:
    write_profile("older", date="2026-11-01", table={**TABLE, 128: 4000.0})
    newest = write_profile("newer", date="2026-12-03")
    found = calibrated_here(DEMO_TARGET, "llamacpp")
    assert found is not None and found.path == newest
    assert build_engine(profile="cpu").profile_label.endswith("cpu.toml")
    plain = build_engine(profile="none")
    assert plain.profile_label == BUILTIN_PROFILE
    assert dict(plain.config.controller.verify_ms) == dict(DEFAULT_VERIFY_MS)


def test_same_model_by_path(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    write_profile("local", target=str(model))
    other_spelling = os.path.join(str(tmp_path), ".", "m.gguf")
    assert calibrated_here(other_spelling, "llamacpp") is not None


def test_run_says_which_profile_it_chose(smollm2_path: Path) -> None:
    write_profile("local", target=str(smollm2_path))
    res = CliRunner().invoke(
        main,
        [
            "run",
            "--model",
            str(smollm2_path),
            "--prompt",
            "Hi",
            "--max-tokens",
            "4",
            "--threads",
            "1",
            "--json",
        ],
    )
    assert res.exit_code == 0, (res.output, res.exception)
    assert f"using profile {user_dir() / 'local.toml'} (calibrated on this machine" in res.stderr

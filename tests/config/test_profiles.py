"""Hardware profiles, `edge-spec calibrate` and `edge-spec profiles`, and the controller's use of
a profile's cost table."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from edge_spec.cli.main import main
from edge_spec.config.profiles import (
    REQUIRED_POINTS,
    SOURCES,
    load_profile,
    parse_profile,
    profile_names,
    shipped_dir,
)
from edge_spec.config.settings import ControllerSettings
from edge_spec.core.controller import Controller
from edge_spec.core.types import Draft
from edge_spec.errors import UserError

SHIPPED = sorted(p.stem for p in shipped_dir().glob("*.toml"))


def invoke(*args: str, **kw):  # noqa: ANN201
    return CliRunner().invoke(main, list(args), **kw)


def one_line_error(res) -> str:  # noqa: ANN001
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    err = res.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in res.output
    return err


def test_shipped_set() -> None:
    assert {"cpu", "cpu-2core", "rtx4090", "apple-m"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profile_loads(name: str) -> None:
    prof = load_profile(name)
    assert prof.name == name and prof.path is not None and prof.path.parent == shipped_dir()
    c = prof.costs
    assert c.source in SOURCES and c.method and c.machine and c.date
    assert all(n in c.verify_ms for n in REQUIRED_POINTS)
    assert all(ms > 0 for ms in c.verify_ms.values())
    assert c.verify_ms[64] > c.verify_ms[1] and c.per_token(64) < c.per_token(1)
    assert c.drafter_ratio > 0 and c.prefill_ms_per_token > 0
    if name != "cpu-2core":  # only the dev machine's profile is measured
        assert c.source == "estimated"
    # The TOML writer round-trips, and the profile maps onto the engine and controller.
    assert parse_profile(prof.to_toml(), prof.path) == prof
    cfg = prof.engine_config()
    assert cfg.runtime.threads == prof.runtime.threads and cfg.drafter.kind == prof.drafter.kind
    assert cfg.controller.verify_ms == c.verify_ms
    assert cfg.controller.draft_cost_ratio["model"] == c.drafter_ratio
    assert cfg.controller.draft_cost_ratio["reference"] == 0.001
    json.dumps(prof.to_dict())


def _edit(tmp_path: Path, old: str, new: str, name: str = "bad.toml") -> Path:
    text = (shipped_dir() / "cpu.toml").read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("k_max = 64", "k_max = 64\nk_maxx = 3", "controller.k_maxx"),
        ('name = "cpu"', 'name = "cpu"\ncolour = "red"', "colour"),
        ("[drafter]", "[gpu]\nx = 1\n\n[drafter]", "gpu"),
        ("128 = 1753.0", "128 = 1753.0\nfast = 3.0", "costs.verify_ms.fast"),
    ],
)
def test_unknown_key_names_key_and_file(tmp_path: Path, old: str, new: str, key: str) -> None:
    path = _edit(tmp_path, old, new)
    with pytest.raises(UserError) as exc:
        load_profile(path)
    msg = str(exc.value)
    assert "unknown key" in msg and repr(key) in msg and str(path) in msg


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("k_max = 64", 'k_max = "64"', "controller.k_max"),
        ("threads = 0", "threads = true", "runtime.threads"),
        ("threads = 0", "threads = 1.5", "runtime.threads"),
        ("p_min = 0.6", "p_min = 1.5", "drafter.p_min"),
        ('kind = "hybrid"', 'kind = "eagle"', "drafter.kind"),
        ('source = "estimated"', 'source = "guessed"', "costs.source"),
        ("drafter_ratio = 0.6", "drafter_ratio = [0.6]", "costs.drafter_ratio"),
        ("64 = 889.0", '64 = "889"', "costs.verify_ms.64"),
        ("64 = 889.0", "64 = -1.0", "costs.verify_ms.64"),
        ("64 = 889.0", "", "costs.verify_ms"),  # a required point missing
        ("128 = 1753.0", "128 = 1753.0\n600 = 4000.0", "costs.verify_ms.600"),
    ],
)
def test_wrong_type_or_value_names_key_and_file(
    tmp_path: Path, old: str, new: str, key: str
) -> None:
    path = _edit(tmp_path, old, new)
    with pytest.raises(UserError) as exc:
        load_profile(path)
    msg = str(exc.value)
    assert key in msg and str(path) in msg


def test_bad_toml_and_missing_costs(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text("[runtime\nthreads = 2\n")
    with pytest.raises(UserError, match="broken.toml.*not valid TOML"):
        load_profile(bad)
    partial = tmp_path / "partial.toml"
    partial.write_text("[controller]\nk_max = 8\n")
    with pytest.raises(UserError, match=r"partial.toml.*\[costs\]"):
        load_profile(partial)
    with pytest.raises(UserError, match="unknown profile 'nope'.*cpu-2core"):
        load_profile("nope")
    with pytest.raises(UserError, match="profile file not found"):
        load_profile(tmp_path / "missing.toml")


def test_partial_profile_gets_defaults(tmp_path: Path) -> None:
    text = (shipped_dir() / "cpu.toml").read_text()
    costs = text[text.index("[costs]") :]
    path = tmp_path / "mine.toml"
    path.write_text("[controller]\nk_max = 8\n\n" + costs)
    prof = load_profile(path)
    assert prof.name == "mine" and prof.controller.k_max == 8 and prof.runtime.threads == 0
    assert prof.controller_config().prior_weight == ControllerSettings().prior_weight


# ---- the controller and a profile's cost table ------------------------------------------


def _history_controller(name: str) -> Controller:
    """A controller from profile `name` after 60 verify steps of 60% per-token acceptance."""
    import random

    cfg = load_profile(name).controller_config()
    ctl = Controller(cfg)
    rng = random.Random(7)
    k = 8
    for _ in range(60):  # each token accepted with probability 0.6 until the first rejection
        accepted = 0
        while accepted < k and rng.random() < 0.6:
            accepted += 1
        draft = Draft(tokens=list(range(k)), source="reference", feature="ref-n-le8")
        ctl.observe(draft, k, accepted, cfg.verify_ms[8] * 1.1)
    return ctl


def test_flat_gpu_costs_choose_longer_drafts_than_cpu() -> None:
    gpu, cpu = _history_controller("rtx4090"), _history_controller("cpu-2core")
    # Both learned the same acceptance: about 0.6 + 0.36 + 0.22 = 1.18 tokens of a 3-token draft.
    assert gpu.expected_accepted("ref-n-le8", 3) == pytest.approx(
        cpu.expected_accepted("ref-n-le8", 3)
    )
    assert 0.9 < gpu.expected_accepted("ref-n-le8", 3) < 1.5
    long = Draft(tokens=list(range(64)), source="reference", feature="ref-n-le8")
    k_gpu, k_cpu = gpu.choose(long, 64), cpu.choose(long, 64)
    assert k_gpu >= 4 and k_cpu < k_gpu


@pytest.mark.parametrize("accept", [0.8, 0.9, 0.95])
def test_gpu_table_never_shorter_at_equal_acceptance(accept: float) -> None:
    draft = Draft(tokens=list(range(128)), source="reference", feature="ref-n-le8")
    ks = {}
    for name in ("rtx4090", "cpu-2core"):
        cfg = replace(load_profile(name).controller_config(), feature_priors={"ref-n-le8": accept})
        ks[name] = Controller(cfg).best_prefix(draft, 128)[0]
    assert ks["rtx4090"] > ks["cpu-2core"]


# ---- plumbing into the engine and `edge-spec run` ----------------------------------------


def test_engine_takes_a_profile() -> None:
    from edge_spec.engine import Engine, EngineConfig
    from edge_spec.runtimes.fake import FakeRuntime

    eng = Engine(FakeRuntime(follow="x = 1\n"), None, profile="rtx4090")
    assert eng.config.runtime.n_gpu_layers == -1 and eng.controller.cfg.k_max == 128
    assert eng.controller.verify_ms(1) == pytest.approx(4.31)
    eng = Engine(
        FakeRuntime(follow="x = 1\n"),
        None,
        EngineConfig().override(max_reference_chars=10),
        profile=load_profile("cpu-2core"),
    )
    assert eng.config.reference.max_reference_chars == 10 and eng.config.runtime.threads == 2


class _Stop(UserError):
    pass


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Replace the Engine that `run` builds; record its arguments and stop there."""
    import edge_spec.engine as engine_mod

    seen: dict = {}

    def fake_engine(model, drafter, cfg):  # noqa: ANN001, ANN202
        seen.update(model=model, drafter=drafter, cfg=cfg)
        raise _Stop("stopped before loading")

    monkeypatch.setattr(engine_mod, "Engine", fake_engine)
    monkeypatch.delenv("EDGE_SPEC_PROFILE", raising=False)
    return seen


def test_run_profile_precedence(captured: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    one_line_error(invoke("run", "--prompt", "x", "--profile", "rtx4090", "--threads", "3"))
    cfg = captured["cfg"]
    assert cfg.runtime.threads == 3  # flag beats profile
    assert cfg.runtime.n_gpu_layers == -1 and cfg.controller.k_max == 128  # profile beats default
    assert cfg.controller.verify_ms[1] == pytest.approx(4.31)
    assert captured["drafter"] == "qwen2.5-coder-0.5b-instruct"
    one_line_error(
        invoke(
            "run",
            "--prompt",
            "x",
            "--profile",
            "rtx4090",
            "--k-max",
            "16",
            "--n-gpu-layers",
            "10",
            "--draft",
            "reference",
        )
    )
    cfg = captured["cfg"]
    assert (
        cfg.controller.k_max == 16
        and cfg.runtime.n_gpu_layers == 10
        and cfg.drafter.kind == "reference"
    )
    assert captured["drafter"] is None
    # The environment names a profile when the flag does not; no profile = built-in defaults.
    monkeypatch.setenv("EDGE_SPEC_PROFILE", "apple-m")
    one_line_error(invoke("run", "--prompt", "x"))
    assert captured["cfg"].controller.verify_ms[1] == pytest.approx(17.72)
    monkeypatch.delenv("EDGE_SPEC_PROFILE")
    one_line_error(invoke("run", "--prompt", "x"))
    assert captured["cfg"].controller == ControllerSettings()


def test_run_unknown_profile_is_one_line_error(captured: dict, tmp_path: Path) -> None:
    err = one_line_error(invoke("run", "--prompt", "x", "--profile", "nope"))
    assert "unknown profile 'nope'" in err and not captured
    bad = _edit(tmp_path, "decay = 0.98", "decay = 0.98\ndecy = 1")
    err = one_line_error(invoke("run", "--prompt", "x", "--profile", str(bad)))
    assert "controller.decy" in err and str(bad) in err


# ---- `edge-spec profiles` ---------------------------------------------------------------


def test_profiles_list_and_show() -> None:
    res = invoke("profiles", "list", "--json")
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert set(SHIPPED) <= set(rows) and rows["rtx4090"]["source"] == "estimated"
    assert {n for n, _ in profile_names()} == set(rows)
    res = invoke("profiles", "list")
    assert res.exit_code == 0 and "cpu-2core" in res.stdout
    res = invoke("profiles", "show", "rtx4090", "--json")
    d = json.loads(res.stdout)
    assert d["name"] == "rtx4090" and d["costs"]["verify_ms"]["128"] > 0
    res = invoke("profiles", "show", str(shipped_dir() / "cpu.toml"))
    assert res.exit_code == 0 and "[costs.verify_ms]" in res.stdout
    assert "unknown profile" in one_line_error(invoke("profiles", "show", "nope"))


# ---- calibrate on a real (tiny) model ---------------------------------------------------


def _sane(prof, quick: bool) -> None:  # noqa: ANN001
    c = prof.costs
    assert c.source == "measured" and c.machine and c.date and c.method
    assert all(n in c.verify_ms and c.verify_ms[n] > 0 for n in REQUIRED_POINTS)
    assert c.verify_ms[64] > c.verify_ms[1]
    assert c.per_token(64) < c.per_token(1)
    assert c.prefill_ms_per_token > 0 and c.drafter_ratio > 0
    assert ("extrapolated" in c.method) == quick


@pytest.mark.real
def test_calibrate_quick_writes_loadable_profile(smollm2_path: Path, tmp_path: Path) -> None:
    from edge_spec.bench.calibrate import calibrate
    from edge_spec.fsutil import write_text

    steps: list[tuple[int, int]] = []
    # One thread: on a busy 2-core machine, 2 llama.cpp threads stall each other's barriers.
    prof = calibrate(
        smollm2_path,
        smollm2_path,
        threads=1,
        quick=True,
        name="tiny",
        prompt_tokens=128,
        report=lambda _d, done, total: steps.append((done, total)),
    )
    _sane(prof, quick=True)
    assert prof.runtime.threads == 1 and prof.drafter.kind == "hybrid"
    assert "128-token code prompt" in prof.costs.method
    assert steps and steps[-1][0] == steps[-1][1]  # the progress reached its total
    out = tmp_path / "tiny.toml"
    write_text(out, prof.to_toml())
    back = load_profile(out)
    assert back == prof and back.name == "tiny"


@pytest.mark.real
def test_calibrate_cli_json(smollm2_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "mine.toml"
    res = invoke(
        "calibrate",
        "--model",
        str(smollm2_path),
        "--drafter",
        "none",
        "--threads",
        "1",
        "--quick",
        "--out",
        str(out),
        "--json",
    )
    assert res.exit_code == 0, (res.output, res.exception)
    d = json.loads(res.stdout)
    assert d["name"] == "mine" and d["costs"]["source"] == "measured"
    assert d["drafter"]["kind"] == "reference" and d["path"] == str(out)
    prof = load_profile(out)
    _sane(prof, quick=True)
    assert prof.costs.verify_ms[8] == d["costs"]["verify_ms"]["8"]
    assert [p.name for p in out.parent.iterdir()] == ["mine.toml"]  # atomic: no leftovers

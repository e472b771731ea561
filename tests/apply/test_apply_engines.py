"""The three apply engines (auto, merge, model) through the API, the CLI and the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from edge_spec.cli.main import main
from edge_spec.config.settings import EngineConfig
from edge_spec.engine import Engine
from edge_spec.errors import UserError
from edge_spec.runtimes.fake import FakeRuntime

ORIG = "def a():\n    return 1\n\n\ndef b():\n    return 2\n\n\ndef c():\n    return 3\n"
SURE = "# ... existing code ...\n\ndef b():\n    return 20\n\n# ... existing code ...\n"
MERGED = ORIG.replace("return 2\n", "return 20\n")
LOST = "# ... existing code ...\nvalue = compute_something_new()\n# ... existing code ...\n"
MISSING_MODEL = "/nonexistent/model.gguf"


def test_auto_returns_the_merge_without_loading_a_model() -> None:
    eng = Engine(MISSING_MODEL)  # would fail to load: auto must not try
    res = eng.apply(ORIG, SURE, path="x.py")
    assert res.engine == "merge" and res.text == MERGED and not eng.loaded
    assert [v["status"] for v in res.verdicts] == ["exact"]
    assert res.stats.output_tokens == 0 and res.stats.finish_reason == "stop"


def test_merge_engine_names_the_hunk_it_is_not_sure_of() -> None:
    eng = Engine(MISSING_MODEL)
    with pytest.raises(UserError, match=r"hunk 1 \(snippet lines 2-2\) is unplaced"):
        eng.apply(ORIG, LOST, engine="merge", path="x.py")
    assert not eng.loaded


def test_auto_falls_back_to_the_model_and_model_always_runs_it() -> None:
    with pytest.raises(UserError, match="not found"):
        Engine(MISSING_MODEL).apply(ORIG, LOST, path="x.py")  # not sure -> the model loads
    rt = FakeRuntime(follow="```\n" + MERGED + "```\n", n_ctx=8192)
    eng = Engine(rt, None, EngineConfig().override(kind="reference"))
    res = eng.apply(ORIG, SURE, engine="model", path="x.py")
    assert res.engine == "model" and res.text == MERGED and not res.suspect
    assert res.verdicts and res.stats.output_tokens > 0


def test_a_wrong_model_answer_is_suspect() -> None:
    wrong = ORIG.replace("return 2\n", "return 20\n").replace("return 3\n", "return 33\n")
    rt = FakeRuntime(follow="```\n" + wrong + "```\n", n_ctx=8192)
    # The wrong lines are in neither file, which the default guard would not let it write.
    res = Engine(rt, None, EngineConfig().override(kind="reference")).apply(
        ORIG, SURE, engine="model", path="x.py", guard="markers"
    )
    assert res.text == wrong
    assert any("outside the edited regions" in p for p in res.suspect), res.suspect


def _files(tmp_path: Path, update: str) -> list[str]:
    (tmp_path / "o.py").write_text(ORIG)
    (tmp_path / "u.py").write_text(update)
    return [
        "run",
        "--original",
        str(tmp_path / "o.py"),
        "--update",
        str(tmp_path / "u.py"),
        "--model",
        MISSING_MODEL,
    ]


def test_cli_engines(tmp_path: Path) -> None:
    args = _files(tmp_path, SURE)
    out = tmp_path / "m.py"
    res = CliRunner().invoke(main, [*args, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text() == MERGED and "engine merge" in res.stderr
    res = CliRunner().invoke(main, [*args, "--json"])
    d = json.loads(res.stdout)
    assert d["engine"] == "merge" and d["text"] == MERGED and d["verdicts"][0]["status"] == "exact"
    res = CliRunner().invoke(main, [*args, "--diff"])
    assert res.exit_code == 0 and "-    return 2\n+    return 20\n" in res.stdout
    assert "hunk 1" in res.stderr and "exact" in res.stderr
    res = CliRunner().invoke(
        main, [*_files(tmp_path, LOST), "--engine", "merge", "--out", str(tmp_path / "n.py")]
    )
    assert res.exit_code == 2 and not (tmp_path / "n.py").exists()
    err = res.stderr.strip()
    assert err.startswith("error: hunk 1") and "\n" not in err
    res = CliRunner().invoke(main, [*args, "--engine", "model"])  # the model path loads it
    assert res.exit_code == 2 and "not found" in res.stderr


def test_server_apply_engine_field() -> None:
    fastapi_testclient = pytest.importorskip("fastapi.testclient")
    from edge_spec.server.app import create_app

    rt = FakeRuntime(follow="```\n" + MERGED + "```\n", n_ctx=8192)
    eng = Engine(rt, None, EngineConfig().override(kind="reference"))
    with fastapi_testclient.TestClient(create_app(eng), base_url="http://localhost") as client:
        r = client.post("/v1/apply", json={"original": ORIG, "update": SURE, "path": "x.py"})
        assert r.status_code == 200, r.text
        d = r.json()
        assert d["engine"] == "merge" and d["merged"] == MERGED and d["verdicts"]
        r = client.post(
            "/v1/apply", json={"original": ORIG, "update": SURE, "engine": "model", "path": "x.py"}
        )
        d = r.json()
        assert d["engine"] == "model" and d["merged"] == MERGED and d["suspect"] == []
        assert d["usage"]["completion_tokens"] > 0
        # Without a language (and too short a file to tell it from the content) the merge is
        # unsure; a model that wrote the whole file the way the merge guessed chose that
        # placement itself (the guess only drafted for it): not suspect for that alone.
        short = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
        edit = "# ... existing code ...\n\ndef b():\n    return 20\n"
        guess = short.replace("return 2\n", "return 20\n")
    guessing = Engine(
        FakeRuntime(follow="```\n" + guess + "```\n", n_ctx=8192),
        None,
        EngineConfig().override(kind="reference"),
    )
    with fastapi_testclient.TestClient(create_app(guessing), base_url="http://localhost") as client:
        r = client.post("/v1/apply", json={"original": short, "update": edit, "engine": "model"})
        d = r.json()
        assert d["merged"] == guess and d["engine"] == "model" and d["suspect"] == [], d
        r = client.post("/v1/apply", json={"original": ORIG, "update": LOST, "engine": "merge"})
        assert r.status_code == 400 and "hunk 1" in r.json()["error"]["message"]


@pytest.mark.parametrize("update", ["", "\n\n", "# ... existing code ...\n"])
def test_a_snippet_with_nothing_to_apply_is_a_user_error(update: str) -> None:
    eng = Engine(MISSING_MODEL)  # refused before any model would load
    for engine in ("auto", "merge", "model"):
        with pytest.raises(UserError, match="no lines to apply"):
            eng.apply(ORIG, update, engine=engine, path="x.py")
    assert not eng.loaded

"""The command line through click's CliRunner: contracts, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from edge_spec.cli.main import main

CONTRACT = (
    "text",
    "finish_reason",
    "prompt_tokens",
    "output_tokens",
    "prefill_ms",
    "decode_ms",
    "decode_tok_s",
    "target_forwards",
    "tokens_per_forward",
    "drafted",
    "accepted",
    "acceptance",
    "draft",
    "model",
    "drafter",
)


def invoke(*args: str, **kw):  # noqa: ANN201
    return CliRunner().invoke(main, list(args), **kw)


def one_line_error(res) -> str:  # noqa: ANN001
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    err = res.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in res.output
    return err


def test_help_lists_commands() -> None:
    res = invoke("--help")
    assert res.exit_code == 0 and "models" in res.output and "run" in res.output


def test_negative_seed_is_refused_before_any_model_loads() -> None:
    res = CliRunner().invoke(main, ["run", "--prompt", "hi", "--seed", "-1"])
    assert res.exit_code == 2
    assert "--seed" in res.output and "Traceback" not in res.output


def test_models_list_json() -> None:
    names = {m["name"] for m in json.loads(invoke("models", "list", "--json").stdout)}
    assert {
        "qwen2.5-coder-1.5b-instruct-q4_k_m",
        "qwen2.5-coder-0.5b-instruct",
        "smollm2-135m-instruct-q4_1",
    } <= names


@pytest.mark.real
@pytest.mark.parametrize("draft", ["none", "reference"])
def test_run_prompt_json(smollm2_path: Path, draft: str) -> None:
    res = invoke(
        "run",
        "--model",
        str(smollm2_path),
        "--prompt",
        "Write a Python hello world.",
        "--max-tokens",
        "24",
        "--draft",
        draft,
        "--json",
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert all(k in d for k in CONTRACT)
    assert d["output_tokens"] <= 24 and d["finish_reason"] in ("eos", "length", "stop")
    assert d["accepted"] <= d["drafted"] and d["draft"] == draft and d["drafter"] is None
    assert d["target_forwards"] >= 1 and d["text"]


@pytest.mark.real
def test_run_apply_streams_and_writes_out(smollm2_path: Path, tmp_path: Path) -> None:
    ex = Path(__file__).resolve().parents[2] / "examples" / "apply"
    out = tmp_path / "merged.py"
    args = [
        "run",
        "--model",
        str(smollm2_path),
        "--original",
        str(ex / "original.py"),
        "--update",
        str(ex / "update.py"),
        "--max-tokens",
        "40",
        "--engine",
        "model",
    ]
    res = invoke(*args)
    # 40 tokens cannot hold the whole file: the answer check calls it suspect (exit 3).
    assert res.exit_code == 3 and res.stdout.strip() and "decode" in res.stderr
    assert "looks wrong" in res.stderr
    res = invoke(*args, "--out", str(out), "--json")  # refused: --out stays untouched
    assert res.exit_code == 3 and json.loads(res.stdout)["suspect"] and not out.exists()
    res = invoke(*args, "--out", str(out), "--json", "--on-suspect", "write")
    assert res.exit_code == 3
    assert out.read_text() == json.loads(res.stdout)["text"]
    assert [p.name for p in tmp_path.iterdir()] == ["merged.py"]


@pytest.mark.real
def test_the_demo_writes_the_expected_file(qwen_paths: tuple[Path, Path]) -> None:
    # `make demo`'s own arguments, on the demo models: the file is right and nothing calls it
    # suspect (a false alarm here once made the demo exit 3 on a right answer).
    ex = Path(__file__).resolve().parents[2] / "examples" / "apply"
    res = invoke(
        "run",
        "--engine",
        "model",
        "--original",
        str(ex / "original.py"),
        "--update",
        str(ex / "update.py"),
        "--instruction",
        (ex / "instruction.txt").read_text().strip(),
    )
    assert res.exit_code == 0, res.stderr
    assert res.stdout == (ex / "expected.py").read_text()
    assert "looks wrong" not in res.stderr


def test_missing_model_and_corrupt_gguf(tmp_path: Path) -> None:
    one_line_error(invoke("run", "--model", str(tmp_path / "nope.gguf"), "--prompt", "x"))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(os.urandom(4096))
    err = one_line_error(invoke("run", "--model", str(bad), "--prompt", "x"))
    assert "bad.gguf" in err


@pytest.mark.parametrize("content", [b"\xff\xfe\x00\x01binary\x00", b"caf\xe9 latin-1\n"])
def test_apply_rejects_binary_and_non_utf8(tmp_path: Path, content: bytes) -> None:
    orig = tmp_path / "orig.py"
    orig.write_bytes(content)
    upd = tmp_path / "upd.py"
    upd.write_text("x = 1\n")
    err = one_line_error(
        invoke(
            "run",
            "--model",
            "smollm2",
            "--original",
            str(orig),
            "--update",
            str(upd),
            "--engine",
            "model",
        )
    )
    assert "orig.py" in err


def test_apply_argument_errors(tmp_path: Path) -> None:
    upd = tmp_path / "upd.py"
    upd.write_text("x = 1\n")
    one_line_error(invoke("run", "--update", str(upd)))
    one_line_error(invoke("run", "--original", str(tmp_path / "missing.py"), "--update", str(upd)))
    one_line_error(invoke("run", "--prompt", "x", "--original", str(upd), "--update", str(upd)))


@pytest.mark.real
def test_apply_too_large_for_context(smollm2_path: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.py"
    big.write_text("".join(f"value_{i} = {i} * {i}\n" for i in range(3000)))
    upd = tmp_path / "upd.py"
    upd.write_text("value_1 = 2\n")
    err = one_line_error(
        invoke(
            "run",
            "--model",
            str(smollm2_path),
            "--original",
            str(big),
            "--update",
            str(upd),
            "--n-ctx",
            "2048",
            "--engine",
            "model",
        )
    )
    assert "context" in err

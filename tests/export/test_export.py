"""`edge-spec export` / `inspect`: HF -> GGUF, quantization, bundles, pairing, failure cleanup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from edge_spec.cli.main import main
from edge_spec.errors import UserError


def invoke(*args: str):  # noqa: ANN201
    return CliRunner().invoke(main, list(args))


def one_line_error(res) -> str:  # noqa: ANN001
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    err = res.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in res.output
    return err


def no_partials(parent: Path) -> bool:
    return not any(".partial-" in p.name for p in parent.iterdir())


# ---- no model needed -------------------------------------------------------------------------


def test_unknown_quant_lists_the_valid_ones() -> None:
    from edge_spec.export.quantize import quant_name

    assert quant_name("q4_k_m") == "Q4_K_M"
    with pytest.raises(UserError, match="unknown GGUF quantization 'Q9_X'.*Q8_0.*Q4_K_M"):
        quant_name("Q9_X")


def test_pre_tokenizer_names() -> None:
    from edge_spec.export.hf_to_gguf import _QWEN2_SPLIT, pre_tokenizer_name

    byte = {"type": "ByteLevel", "use_regex": True}
    assert pre_tokenizer_name({"pre_tokenizer": byte}) == "gpt-2"
    digits = {"type": "Digits", "individual_digits": True}
    seq = {"type": "Sequence", "pretokenizers": [digits, byte]}
    assert pre_tokenizer_name({"pre_tokenizer": seq}) == "smollm"
    split = {"type": "Split", "pattern": {"Regex": _QWEN2_SPLIT}}
    seq = {"type": "Sequence", "pretokenizers": [split, {"type": "ByteLevel", "use_regex": False}]}
    assert pre_tokenizer_name({"pre_tokenizer": seq}) == "qwen2"
    with pytest.raises(UserError, match="pre-tokenizer"):
        pre_tokenizer_name({"pre_tokenizer": {"type": "Metaspace"}})


def test_pickle_only_checkpoint_refused(tmp_path: Path) -> None:
    src = tmp_path / "ckpt"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "llama"}')
    (src / "pytorch_model.bin").write_bytes(b"\x80\x02}q\x00.")
    err = one_line_error(invoke("export", str(src), "--out", str(tmp_path / "b"), "-q"))
    assert "pickle" in err and "safe_serialization=True" in err
    assert not (tmp_path / "b").exists() and no_partials(tmp_path)


def test_bad_safetensors_refused(tmp_path: Path) -> None:
    from edge_spec.export.hf_to_gguf import hf_to_gguf

    src = tmp_path / "ckpt"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": 1}')
    (src / "model.safetensors").write_bytes((10**12).to_bytes(8, "little") + b"{}")
    with pytest.raises(UserError, match="not a valid safetensors file"):
        hf_to_gguf(src, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


@pytest.mark.parametrize(
    "args, match",
    [
        (("--drafter", "x", "--self-drafter", "Q4_0"), "either --drafter"),
        (("--format", "safetensors"), "unknown --format"),
        (("--target-quant", "Q4_0", "--self-drafter", "q4_0"), "target's own quantization"),
    ],
)
def test_bad_option_combinations(tmp_path: Path, args: tuple[str, ...], match: str) -> None:
    err = one_line_error(invoke("export", "smollm2", *args, "--out", str(tmp_path / "b"), "-q"))
    assert match in err


def test_existing_out_refused(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    err = one_line_error(invoke("export", "smollm2", "--out", str(tmp_path / "b"), "-q"))
    assert "already exists" in err


# ---- SmolLM2 ---------------------------------------------------------------------------------


def _onnx_available() -> bool:
    import importlib.util

    return all(
        importlib.util.find_spec(m)
        for m in ("edge_spec.export.onnx", "onnxruntime_genai", "onnxruntime")
    )


@pytest.mark.real
def test_hf_checkpoint_to_gguf_q8_and_onnx_int8(
    smollm2_hf_dir: Path, smollm2_path: Path, tmp_path: Path
) -> None:
    """SmolLM2 GGUF -> HF (fixture) -> GGUF Q8_0 + ONNX int8 bundle, each checked against the
    torch model, then run with llama.cpp and onnxruntime (ONNX part when its extras exist)."""
    from edge_spec.export.gguf_info import gguf_vocab

    onnx = _onnx_available()
    out = tmp_path / "bundle"
    res = invoke(
        "export",
        str(smollm2_hf_dir),
        "--format",
        "gguf,onnx" if onnx else "gguf",
        "--onnx-quant",
        "int8",
        "--target-quant",
        "Q8_0",
        "--threads",
        "1",
        "--out",
        str(out),
        "--json",
        "-q",
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    kinds = {(f["role"], f["format"], f["quant"]) for f in d["files"]}
    assert {("target", "gguf", "Q8_0"), ("tokenizer", "tokenizer", "")} <= kinds
    assert d["tokenizer"]["fingerprint"] == gguf_vocab(smollm2_path).fingerprint
    checks = {c["path"]: c for c in d["checks"]}
    assert set(checks) == {"target-Q8_0.gguf"} | ({"target-onnx-int8"} if onnx else set())
    for c in checks.values():
        assert c["tokens"] == 32 and "torch" in c["reference"] and c["agreement"] >= 0.75, c
    assert no_partials(tmp_path) and not (out / ".work").exists()
    for runtime in ("llamacpp", "ort") if onnx else ("llamacpp",):
        run = invoke(
            "run",
            "--bundle",
            str(out),
            "--runtime",
            runtime,
            "--prompt",
            "Write a haiku about caches",
            "--max-tokens",
            "8",
            "--threads",
            "1",
            "--json",
        )
        assert run.exit_code == 0, run.output
        assert json.loads(run.stdout)["text"].strip(), runtime
    info = json.loads(invoke("inspect", str(out), "--json").stdout)
    assert info["kind"] == "bundle" and info["models"]["target.gguf"]["quant"] == "Q8_0"


@pytest.mark.real
def test_gguf_self_drafter_bundle(tmp_path: Path) -> None:
    """A store GGUF re-quantized directly, with itself at Q4_0 as drafter; engine from bundle."""
    from edge_spec.engine import build_engine
    from edge_spec.export.pipeline import ExportOptions, export

    out = tmp_path / "smol"
    r = export(
        "smollm2-135m-instruct-q4_1",
        out,
        ExportOptions(target_quant="Q8_0", self_drafter="Q4_0", threads=1),
        progress=False,
    )
    assert {c.role for c in r.manifest.checks} == {"target", "drafter"}
    assert all("llama.cpp" in c.reference and c.tokens == 32 for c in r.manifest.checks)
    assert any("compounds" in w for w in r.warnings)  # Q4_1 source re-quantized
    eng = build_engine(bundle=str(out), threads=1, n_ctx=512, draft="model")
    assert eng.model_name == "target-Q8_0" and eng.drafter_name == "drafter-Q4_0"
    assert eng.generate("Say hi", max_tokens=8).text


@pytest.mark.real
def test_failure_in_late_stage_leaves_no_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import edge_spec.export.stages as stages
    from edge_spec.export.pipeline import ExportOptions, export

    def disk_full(*a: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(stages, "write_manifest", disk_full)
    out = tmp_path / "b"
    with pytest.raises(UserError, match="stage 'manifest' failed: OSError.*No space left"):
        export(
            "smollm2-135m-instruct-q4_1",
            out,
            ExportOptions(target_quant="Q4_0", check=False, threads=1),
            progress=False,
        )
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.real
def test_interrupt_leaves_no_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smollm2_path: Path
) -> None:
    import edge_spec.export.stages as quantize  # the stage calls quantize_gguf through its import
    from edge_spec.export.pipeline import ExportOptions, export

    def interrupted(*a: object, **kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(quantize, "quantize_gguf", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export(str(smollm2_path), tmp_path / "b", ExportOptions(check=False), progress=False)
    assert list(tmp_path.iterdir()) == []


# ---- Qwen demo pair --------------------------------------------------------------------------


@pytest.mark.real
@pytest.mark.slow
def test_qwen_drafter_exported_for_target_pairs(
    qwen_paths: tuple[Path, Path], tmp_path: Path
) -> None:
    target, drafter = qwen_paths
    out = tmp_path / "qwen"
    res = invoke(
        "export",
        str(target),
        "--drafter",
        str(drafter),
        "--drafter-quant",
        "Q4_0",
        "--no-check",
        "--threads",
        "1",
        "--out",
        str(out),
        "--json",
        "-q",
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert {(f["role"], f["quant"]) for f in d["files"]} == {
        ("target", "Q4_K_M"),
        ("drafter", "Q4_0"),
    }
    assert d["tokenizer"]["vocab_size"] == 151936 and d["tokenizer"]["eos_id"] == 151645
    pair = invoke(
        "inspect", str(out / "target-Q4_K_M.gguf"), str(out / "drafter-Q4_0.gguf"), "--json"
    )
    assert pair.exit_code == 0 and json.loads(pair.stdout)["pairing"]["pairs"] is True


@pytest.mark.real
@pytest.mark.slow
def test_qwen_and_smollm2_refuse_to_pair(
    qwen_paths: tuple[Path, Path], smollm2_path: Path, tmp_path: Path
) -> None:
    err = one_line_error(
        invoke(
            "export",
            str(smollm2_path),
            "--drafter",
            str(qwen_paths[1]),
            "--out",
            str(tmp_path / "b"),
            "-q",
        )
    )
    assert "stage 'pair'" in err and "does not pair" in err
    assert list(tmp_path.iterdir()) == []
    err = one_line_error(invoke("inspect", str(qwen_paths[0]), str(smollm2_path)))
    assert "cannot draft for" in err and "differ" in err


# ---- per-family checks of the converter (no model needed) -----------------------------------


def test_unknown_model_type_lists_the_supported(tmp_path: Path) -> None:
    from edge_spec.export.hf_to_gguf import read_config

    (tmp_path / "config.json").write_text('{"model_type": "mamba"}')
    with pytest.raises(
        UserError, match="'mamba' is not supported.*qwen3.*gemma3_text.*phi3.*granite.*starcoder2"
    ):
        read_config(tmp_path)


@pytest.mark.parametrize(
    "change, match",
    [
        (
            {"layer_types": ["full_attention", "sliding_attention"]},
            "sliding-window layers then one global",
        ),
        ({"query_pre_attn_scalar": 256}, "query_pre_attn_scalar 256 differs"),
    ],
)
def test_gemma3_llama_cpp_would_run_differently(change: dict, match: str) -> None:
    gguf = pytest.importorskip("gguf")
    from edge_spec.export.gguf_arches import ARCHES

    cfg = {
        "hidden_size": 64,
        "num_attention_heads": 4,
        "head_dim": 16,
        "num_hidden_layers": 2,
        "sliding_window": 16,
        "query_pre_attn_scalar": 16,
        **change,
    }
    with pytest.raises(UserError, match=match):
        ARCHES["gemma3_text"].extra(gguf.GGUFWriter(None, "gemma3"), cfg, Path("ckpt"))


def test_phi3_longrope_refused() -> None:
    gguf = pytest.importorskip("gguf")
    from edge_spec.export.gguf_arches import ARCHES

    cfg = {
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]},
    }
    with pytest.raises(UserError, match="LongRoPE"):
        ARCHES["phi3"].extra(gguf.GGUFWriter(None, "phi3"), cfg, Path("ckpt"))


def _llama_with_vocab(root: Path, tokenizer: dict | None) -> Path:
    """A one-layer llama checkpoint folder whose vocabulary is `tokenizer` (a tokenizer.json
    body), or only a SentencePiece `tokenizer.model` when None."""
    np = pytest.importorskip("numpy")
    st = pytest.importorskip("safetensors.numpy")
    cfg = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 8,
        "intermediate_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "vocab_size": 4,
        "max_position_embeddings": 64,
        "rms_norm_eps": 1e-6,
    }
    root.mkdir()
    (root / "config.json").write_text(json.dumps(cfg))
    st.save_file(
        {"model.embed_tokens.weight": np.zeros((4, 8), np.float32)}, root / "m.safetensors"
    )
    if tokenizer is None:
        (root / "tokenizer.model").write_bytes(b"\n\x0b\n\x05<unk>\x15\x00\x00\x00\x00\x18\x02")
    else:
        (root / "tokenizer.json").write_text(json.dumps(tokenizer))
    return root


_SPM_BPE = {"type": "BPE", "byte_fallback": True, "vocab": {"<unk>": 0, "▁a": 1, "a": 2, "▁": 3}}


@pytest.mark.parametrize(
    ("tokenizer", "kind"),
    [
        (None, "SentencePiece vocabulary (tokenizer.model"),
        ({"model": {**_SPM_BPE, "merges": ["▁ a"]}}, "SentencePiece-style BPE vocabulary"),
        ({"model": {"type": "Unigram", "vocab": [["<unk>", 0.0]]}}, "Unigram vocabulary"),
    ],
)
def test_sentencepiece_vocabulary_refused_with_what_to_do(
    tmp_path: Path, tokenizer: dict | None, kind: str
) -> None:
    src = _llama_with_vocab(tmp_path / "ckpt", tokenizer)
    res = invoke("export", str(src), "--format", "gguf", "--out", str(tmp_path / "b"), "-q")
    err = one_line_error(res)
    assert kind in err and "is not supported for" in err and "export" in err, err
    assert "convert_hf_to_gguf.py" in err and "byte-level BPE" in err, err
    assert not (tmp_path / "b").exists() and no_partials(tmp_path)

"""Hugging Face checkpoint -> ONNX decoder folder that `edge_spec.runtimes.ort` runs.

Two exporters:

- `builder` (default): onnxruntime-genai's model builder
  (`python -m onnxruntime_genai.models.builder -i HF -o OUT -p int4|int8|fp32 -e cpu|cuda`). It
  writes `model.onnx` + `model.onnx.data`, `genai_config.json` and the tokenizer files, with
  fused GroupQueryAttention and MatMulNBits weights: the fastest graphs on CPU and CUDA. It runs
  in a subprocess because it is a script, not a library: it puts its own folder on `sys.path`
  and imports top-level modules named `builders` and `quantization`, loads torch and
  transformers, and prints thousands of progress lines; a child process keeps all of that (and
  its memory, and any crash) out of ours, and `-m` is its documented, stable interface.
  It needs the `export` extra plus the `onnx` and `onnx-ir` packages. The default int8/int4
  graphs use MatMulNBits `accuracy_level=4` (int8 activations), whose one-token and
  multi-token kernels differ in the logits, so a speculative verify step and plain decoding can
  pick different tokens at near-ties; lower accuracy levels are exact but far slower per token,
  and fp32 is exact at a small multiple of the int8 cost (docs/runtimes.md).
- `optimum`: `optimum-cli export onnx --task text-generation-with-past`, for architectures the
  builder does not cover. Its package (`optimum-onnx`, extra `optimum`) pins transformers below
  4.58, so install it in its own environment, never beside the `export` extra (it downgrades
  transformers 5.x). Pitfalls handled here: a transformers-5 `config.json` keeps RoPE settings
  in `rope_parameters`, which 4.57 does not read, silently falling back to rope_theta 10000 (the
  model then runs but is wrong), so the exporter is given a copy of the config with `rope_theta`
  and `rope_scaling` written at the top level; it does not copy a 5.x-saved tokenizer, so the
  tokenizer files are copied after it. It writes fp32 only here: its int8 (`quantize_dynamic`)
  and int4 outputs were slower and less faithful than the builder's (docs/runtimes.md).

Output is written into a hidden temp folder beside `out_dir` and renamed into place at the end,
so a failed or interrupted export never leaves a folder that looks complete.

Example: `export_onnx("exports/smollm2-hf", "exports/smollm2-onnx-int8", quant="int8")`
PosixPath('exports/smollm2-onnx-int8')
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from edge_spec.errors import MissingExtraError, UserError
from edge_spec.store.checkpoint import check_hf_checkpoint, check_onnx_dir

QUANTS = {
    "int4": "int4",
    "int8": "int8",
    "fp32": "fp32",
    "none": "fp32",
    "fp16": "fp16",
    "bf16": "bf16",
}
PROVIDERS = ("cpu", "cuda")
EXPORTERS = ("builder", "optimum")
# Files the runtime reads besides the graph; copied from the source when the exporter did not.
AUX_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "generation_config.json",
    "config.json",
)
# Architectures the model builder of the pinned onnxruntime-genai cannot export, found on tiny
# checkpoints of each family: (reason, or None for "unknown to it"). Gemma 3's builder reads a
# flat `rope_type`, and transformers 5 keeps Gemma 3's RoPE per layer type.
BUILDER_GAPS: dict[str, str | None] = {
    "starcoder2": None,
    "gemma3_text": "it cannot read Gemma 3's per-layer RoPE settings as transformers 5 writes them",
}
# int4: quantize the embedding Gather too (smaller, and greedy tokens stay those of fp32).
INT4_OPTIONS = {"op_types_to_quantize": "MatMul/Gather"}


def export_onnx(
    hf_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    quant: str = "int8",
    provider: str = "cpu",
    exporter: str = "builder",
    extra_options: dict[str, str] | None = None,
) -> Path:
    """Export checkpoint `hf_dir` to ONNX folder `out_dir` (atomically); returns `out_dir`."""
    hf = check_hf_checkpoint(hf_dir)
    out = Path(out_dir)
    precision = _validate(out, quant, provider, exporter)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        built = work / "out"
        built.mkdir()
        if exporter == "builder":
            check_builder_supports(hf)
            _run_builder(hf, built, work, precision, provider, extra_options or {})
        else:
            _run_optimum(hf, built, work, provider)
        _copy_aux(hf, built)
        check_onnx_dir(built)
        os.replace(built, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def _validate(out: Path, quant: str, provider: str, exporter: str) -> str:
    """The builder precision for `quant`; refuses bad combinations with one line."""
    if out.exists():
        raise UserError(f"{out} already exists: remove it or choose another --out")
    if exporter not in EXPORTERS:
        raise UserError(f"unknown ONNX exporter {exporter!r}: use one of {', '.join(EXPORTERS)}")
    if provider not in PROVIDERS:
        raise UserError(f"unknown ONNX provider {provider!r}: use cpu or cuda")
    precision = QUANTS.get(quant.lower())
    if precision is None:
        raise UserError(f"unknown ONNX quantization {quant!r}: use int4, int8 or none (fp32)")
    if precision in ("fp16", "bf16") and provider != "cuda":
        raise UserError(
            f"ONNX {precision} is for CUDA only: pass provider cuda, or int8/fp32 for CPU"
        )
    if exporter == "optimum" and precision != "fp32":
        raise UserError("the optimum exporter writes fp32 only here; use the builder for int4/int8")
    return precision


def builder_version() -> str:
    """The installed onnxruntime-genai version (CPU or CUDA package)."""
    for dist in ("onnxruntime-genai", "onnxruntime-genai-cuda"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "(not installed)"


def converter_label(exporter: str) -> str:
    """What wrote an ONNX folder, with its version, for the bundle manifest."""
    if exporter == "builder":
        return f"onnxruntime-genai {builder_version()} model builder"
    try:
        return f"optimum-onnx {version('optimum-onnx')} (optimum-cli export onnx)"
    except PackageNotFoundError:
        return "optimum-cli export onnx"


def check_builder_supports(hf: Path) -> None:
    """Refuse, in one line naming the builder's version, a family it cannot export."""
    cfg = json.loads((hf / "config.json").read_text(encoding="utf-8"))
    kind = str(cfg.get("model_type"))
    if kind not in BUILDER_GAPS:
        return
    nested = any(isinstance(v, dict) for v in (cfg.get("rope_parameters") or {}).values())
    reason = BUILDER_GAPS[kind]
    if reason is not None and kind == "gemma3_text" and not nested:
        return
    why = reason or f"it does not know the {kind} architecture"
    raise UserError(
        f"onnxruntime-genai {builder_version()}'s ONNX model builder cannot export "
        f"{hf.name} ({kind}): {why}; export it with --format gguf"
    )


def _run_builder(
    hf: Path, built: Path, work: Path, precision: str, provider: str, extra: dict[str, str]
) -> None:
    """onnxruntime-genai's model builder in a child process, offline, logging to a file."""
    for module, extra_name in (
        ("onnxruntime_genai", "export"),
        ("onnx_ir", "export"),
        ("onnx", "export"),
        ("torch", "export"),
        ("transformers", "export"),
    ):
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(module, extra_name)
    options = {**(INT4_OPTIONS if precision == "int4" else {}), **extra}
    cmd = [
        sys.executable,
        "-m",
        "onnxruntime_genai.models.builder",
        "-i",
        str(hf),
        "-o",
        str(built),
        "-p",
        precision,
        "-e",
        provider,
        "-c",
        str(work / "cache"),
    ]
    if options:
        cmd += ["--extra_options", *(f"{k}={v}" for k, v in options.items())]
    _run("the ONNX model builder", cmd, work / "builder.log")


def _run_optimum(hf: Path, built: Path, work: Path, provider: str) -> None:
    """optimum-cli's exporter on a staged copy of the checkpoint with a 4.x-readable config."""
    if (
        importlib.util.find_spec("optimum") is None
        or importlib.util.find_spec("optimum.exporters.onnx") is None
    ):
        raise UserError(
            "the optimum exporter needs 'optimum-onnx': pip install "
            "'edge-spec[optimum]' in a separate environment (it pins "
            "transformers<4.58), or use the default builder exporter"
        )
    staged = _stage_for_optimum(hf, work / "staged")
    cmd = [
        sys.executable,
        "-m",
        "optimum.commands.optimum_cli",
        "export",
        "onnx",
        "--model",
        str(staged),
        "--task",
        "text-generation-with-past",
    ]
    if provider == "cuda":
        cmd += ["--device", "cuda"]
    _run("optimum's ONNX exporter", [*cmd, str(built)], work / "optimum.log")


def _stage_for_optimum(hf: Path, staged: Path) -> Path:
    """Links to the checkpoint's files, with config.json's RoPE settings at the top level."""
    staged.mkdir()
    for p in hf.iterdir():
        if p.is_file() and p.name != "config.json":
            (staged / p.name).symlink_to(p.resolve())
    cfg = json.loads((hf / "config.json").read_text(encoding="utf-8"))
    rope = cfg.get("rope_parameters")
    if isinstance(rope, dict):
        # transformers 4.57 reads rope_theta / rope_scaling only; without them RoPE is wrong.
        if rope.get("rope_theta") is not None:
            cfg.setdefault("rope_theta", rope["rope_theta"])
        if rope.get("rope_type", "default") != "default":
            cfg.setdefault("rope_scaling", {k: v for k, v in rope.items() if k != "rope_theta"})
    (staged / "config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    return staged


def _run(what: str, cmd: list[str], log: Path) -> None:
    """Run an exporter offline; a failure is a UserError with its last error line."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    with open(log, "wb") as fh:
        rc = subprocess.run(
            cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL, check=False
        ).returncode
    if rc != 0:
        raise UserError(f"{what} failed (exit {rc}): {_last_error(log)}")


def _last_error(log: Path) -> str:
    """The most telling line of an exporter's log: its last exception line, else its last line."""
    lines = [
        ln.strip()
        for ln in log.read_text(encoding="utf-8", errors="replace").replace("\r", "\n").splitlines()
        if ln.strip()
    ]
    errors = [ln for ln in lines if "Error" in ln.split(":", 1)[0] or ln.startswith("Error")]
    pick = (errors or lines or ["no output"])[-1]
    return pick[:300]


def _copy_aux(hf: Path, built: Path) -> None:
    """Tokenizer and config files the runtime needs, when the exporter did not write them."""
    for name in AUX_FILES:
        src = hf / name
        if src.is_file() and not (built / name).exists():
            shutil.copy2(src, built / name)
    if not (built / "tokenizer.json").is_file():
        raise UserError(
            f"{hf}: no tokenizer.json (a fast tokenizer) to ship with the ONNX "
            "model; save the tokenizer with transformers first"
        )

"""The bodies of the export stages; `edge_spec.export.pipeline` runs them in order.

Each stage works on the `_Run` of the pipeline (options, the partial folder, what earlier stages
made) and returns the bytes it wrote, for the stage summary.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edge_spec.core.pairing import check_pair
from edge_spec.errors import MissingExtraError, UserError
from edge_spec.export.bundle import (
    BundleFile,
    CheckResult,
    Manifest,
    file_entry,
    tokenizer_info,
    write_manifest,
)
from edge_spec.export.gguf_info import gguf_vocab, model_vocab, read_gguf_fields
from edge_spec.export.gguf_to_hf import gguf_to_hf
from edge_spec.export.hf_to_gguf import hf_to_gguf
from edge_spec.export.quantize import gguf_quant, quantize_gguf
from edge_spec.export.roundtrip import open_for_check, roundtrip

if TYPE_CHECKING:
    from edge_spec.export.pipeline import Source, _Run
    from edge_spec.runtimes.base import VocabInfo


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def gguf_converter(converted: bool, quantized: bool) -> str:
    """What wrote a bundle's GGUF file, with the versions that matter for reproducing it."""
    parts = []
    if converted:
        parts.append(f"edge-spec hf_to_gguf {_version('edge-spec')} (gguf {_version('gguf')})")
    if quantized:
        parts.append(f"llama.cpp quantize (llama-cpp-python {_version('llama-cpp-python')})")
    return " + ".join(parts) or "copy of the source file"


def _hf_arch(hf: Path) -> str:
    try:
        return str(json.loads((hf / "config.json").read_text(encoding="utf-8"))["model_type"])
    except (OSError, ValueError, KeyError):
        return ""


def pair_sources(target: Source, drafter: Source | None) -> VocabInfo:
    """The target's vocabulary; a drafter with another vocabulary is refused here, early."""
    tv = model_vocab(target.path)
    if drafter is not None:
        check_pair(tv, model_vocab(drafter.path), (target.label, drafter.label))
    return tv


def _jobs(
    run: _Run, target: Source, drafter: Source | None, onnx: bool = False
) -> list[tuple[str, Source, str]]:
    """(role, source, quant) for each model to produce in GGUF (or ONNX) form."""
    o = run.opts
    if onnx:
        jobs = [("target", target, o.onnx_quant)]
        if drafter is not None:
            jobs.append(("drafter", drafter, o.onnx_quant))
        elif o.self_drafter and o.onnx_quant != "int4":
            jobs.append(("drafter", target, "int4"))  # the lowest-bit ONNX quantization
        elif o.self_drafter:
            run.warn(
                "--self-drafter has no ONNX form when the target is already int4; the "
                "ONNX part of the bundle has no drafter"
            )
        return jobs
    jobs = [("target", target, o.target_quant)]
    if drafter is not None or o.self_drafter:
        jobs.append(("drafter", drafter or target, o.drafter_quant))
    return jobs


def convert(run: _Run, target: Source, drafter: Source | None) -> int:
    """Hugging Face sources -> f16 (or f32) GGUF in the work folder, once per source."""
    written = 0
    for role, src, quant in _jobs(run, target, drafter):
        if src.kind != "hf" or src.path in run.inputs:
            continue
        out_type = "f32" if quant == "F32" else "f16"
        dst = run.work / f"{role}-{out_type}.gguf"
        run.reporter.start("convert", f"{src.path.name} -> {out_type} GGUF")
        t0 = time.perf_counter()
        hf_to_gguf(src.path, dst, out_type, progress=run.reporter.update)
        run.inputs[src.path] = dst
        written += run.record("convert", f"{role} -> {out_type}", t0, dst.stat().st_size)
    return written


def quantize(run: _Run, target: Source, drafter: Source | None) -> int:
    """Each GGUF job: copy when the input already has the wanted quant, else quantize."""
    written = 0
    for role, src, quant in _jobs(run, target, drafter):
        inp = run.inputs.get(src.path, src.path)
        dst = run.tmp / f"{role}-{quant}.gguf"
        run.reporter.start("quantize", f"{role} -> {quant}")
        t0, action = time.perf_counter(), "quantize"
        if gguf_quant(inp) == quant:
            action = "copy"
            shutil.copyfile(inp, dst)  # never a link: the bundle must not change with the store
            if inp == src.path:
                run.copied.add(role)
        else:
            if src.kind == "gguf" and gguf_quant(inp) not in ("F32", "F16", "BF16"):
                run.warn(
                    f"{role}: re-quantizing {gguf_quant(inp)} -> {quant} compounds "
                    "quantization error; export from an f16 GGUF or the HF checkpoint "
                    "for best quality"
                )
            quantize_gguf(inp, dst, quant, threads=run.opts.threads)
        run.made[(role, "gguf")] = dst
        run.quants[role] = quant
        arch = read_gguf_fields(dst, ("general.architecture",)).get("general.architecture", "")
        run.made_by[(role, "gguf")] = (
            str(arch),
            gguf_converter(src.kind == "hf", action == "quantize"),
        )
        written += run.record("quantize", f"{role} {action} -> {quant}", t0, dst.stat().st_size)
    return written


def _hf_dir(run: _Run, src: Source, role: str) -> Path:
    """A Hugging Face folder for `src`: itself, or its GGUF dequantized by transformers."""
    if src.kind == "hf":
        return src.path
    if src.path not in run.hf_dirs:
        run.reporter.start("onnx", f"{role}: GGUF -> Hugging Face (dequantize)")
        t0 = time.perf_counter()
        # transformers' GGUF loader draws its own tqdm bar on stderr; keep the display whole.
        with contextlib.redirect_stderr(io.StringIO()):
            hf = gguf_to_hf(src.path, run.work / f"{role}-hf")
        run.hf_dirs[src.path] = hf
        size = sum(p.stat().st_size for p in hf.rglob("*") if p.is_file())
        run.record("onnx", f"{role} GGUF -> HF (work folder)", t0, size)
    return run.hf_dirs[src.path]


def onnx(run: _Run, target: Source, drafter: Source | None) -> int:
    """ONNX model folders through edge_spec.export.onnx (the builder or optimum)."""
    try:
        from edge_spec.export.onnx import converter_label, export_onnx  # optional: onnx tooling
    except ImportError as exc:
        raise UserError(
            f"ONNX export is not available in this install ({exc}); use --format gguf"
        ) from None
    o = run.opts
    written = 0
    for role, src, quant in _jobs(run, target, drafter, onnx=True):
        hf = _hf_dir(run, src, role)
        run.reporter.start("onnx", f"{role}: {o.onnx_exporter} {quant}")
        t0 = time.perf_counter()
        folder = Path(
            export_onnx(
                hf,
                run.tmp / f"{role}-onnx-{quant}",
                quant,
                provider=o.onnx_provider,
                exporter=o.onnx_exporter,
            )
        )
        if not folder.resolve().is_relative_to(run.tmp.resolve()):
            raise UserError(f"the ONNX exporter wrote outside the bundle ({folder})")
        run.made[(role, "onnx")] = folder
        run.onnx_quants[role] = quant
        run.made_by[(role, "onnx")] = (_hf_arch(hf), converter_label(o.onnx_exporter))
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        written += run.record("onnx", f"{role} {o.onnx_exporter} {quant}", t0, size)
    return written


def _reference(run: _Run, src: Source, cache: dict[Path, tuple[Any, str]]) -> tuple[Any, str]:
    """The source model as a runtime: llama.cpp for a GGUF, torch (or the f16 GGUF) for HF."""
    if src.path not in cache:
        if src.kind == "gguf":
            cache[src.path] = (
                open_for_check(src.path, "llamacpp", run.opts.threads),
                f"source GGUF in llama.cpp ({src.label})",
            )
        else:
            try:
                cache[src.path] = (
                    open_for_check(src.path, "torch", run.opts.threads),
                    f"source checkpoint in torch fp32 ({src.label})",
                )
            except MissingExtraError:
                if src.path not in run.inputs:
                    raise
                cache[src.path] = (
                    open_for_check(run.inputs[src.path], "llamacpp", run.opts.threads),
                    "f16 GGUF conversion of the source (torch not installed)",
                )
    return cache[src.path]


def check(run: _Run, target: Source, drafter: Source | None) -> None:
    """Round trip of every exported model against its source; warn where it drifts."""
    sources = {"target": target, "drafter": drafter or target}
    refs: dict[Path, tuple[Any, str]] = {}
    for (role, fmt), path in sorted(run.made.items()):
        rel = path.relative_to(run.tmp).as_posix()
        if fmt == "gguf" and role in run.copied:
            run.checks.append(
                CheckResult(
                    rel,
                    role,
                    "identical copy of the source file",
                    run.opts.check_tokens,
                    1.0,
                    -1,
                    0.0,
                )
            )
            continue
        run.reporter.start("check", f"{role} {fmt} vs source")
        t0 = time.perf_counter()
        try:
            exported = open_for_check(
                path, "llamacpp" if fmt == "gguf" else "ort", run.opts.threads
            )
        except (ImportError, MissingExtraError) as exc:
            run.warn(f"{rel}: round-trip check skipped ({exc})")
            continue
        ref, label = _reference(run, sources[role], refs)
        r = roundtrip(exported, ref, run.opts.check_tokens)
        del exported
        run.record("check", f"{role} {fmt}", t0, 0)
        run.checks.append(
            CheckResult(
                rel,
                role,
                label,
                r.tokens,
                round(r.agreement, 4),
                r.first_divergence,
                round(r.max_logit_diff, 4),
            )
        )
        if r.agreement < run.opts.warn_agreement:
            run.warn(
                f"{rel}: agrees with the source on only {r.agreement:.0%} of "
                f"{r.tokens} greedy tokens; quantization drifts far (try a higher-bit "
                "quant)"
            )


def _tokenizer_file(run: _Run, target: Source) -> BundleFile | None:
    hf = target.path if target.kind == "hf" else run.hf_dirs.get(target.path)
    if hf is None or not (hf / "tokenizer.json").is_file():
        return None  # a GGUF-only bundle: the tokenizer lives inside the GGUF files
    shutil.copyfile(hf / "tokenizer.json", run.tmp / "tokenizer.json")
    return file_entry(run.tmp, "tokenizer.json", "tokenizer", "tokenizer", "", target.label)


def manifest(run: _Run, target: Source, drafter: Source | None, vocab: VocabInfo) -> Manifest:
    """Pair the outputs, hash every file, write edge-spec.toml, drop the work folder."""
    o = run.opts
    tok = _tokenizer_file(run, target)
    shutil.rmtree(run.work)  # intermediates (f16 GGUF, dequantized HF) are not part of the bundle
    tg, dg = run.made.get(("target", "gguf")), run.made.get(("drafter", "gguf"))
    if tg is not None:
        vocab = gguf_vocab(tg)  # what llama.cpp will see; equals the source's for sound exports
        if dg is not None:
            check_pair(vocab, gguf_vocab(dg), (tg.name, dg.name))
    labels = {
        "target": target.label,
        "drafter": drafter.label if drafter else f"{target.label} (self-drafter)",
    }
    files: list[BundleFile] = []
    for (role, fmt), path in sorted(run.made.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if fmt == "gguf":
            rel = path.relative_to(run.tmp).as_posix()
            files.append(
                file_entry(
                    run.tmp,
                    rel,
                    role,
                    fmt,
                    run.quants[role],
                    labels[role],
                    *run.made_by[(role, fmt)],
                )
            )
            continue
        for p in sorted(q for q in path.rglob("*") if q.is_file()):
            files.append(
                file_entry(
                    run.tmp,
                    p.relative_to(run.tmp).as_posix(),
                    role,
                    fmt,
                    run.onnx_quants[role],
                    labels[role],
                    *run.made_by[(role, fmt)],
                )
            )
    if tok is not None:
        files.append(tok)
    m = Manifest(
        files=tuple(files),
        tokenizer=tokenizer_info(vocab),
        default_runtime="llamacpp" if "gguf" in o.formats else "ort",
        recommended_profile=o.profile,
        created_by=_created_by(),
        checks=tuple(run.checks),
    )
    write_manifest(run.tmp, m)
    return m


def _created_by() -> str:
    try:
        return f"edge-spec {version('edge-spec')}"
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "edge-spec"

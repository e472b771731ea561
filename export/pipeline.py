"""`edge-spec export`: source model (+ drafter) -> a bundle folder with a manifest.

Stages: load (resolve sources, read vocabularies), pair (refuse a drafter with another
vocabulary before any heavy work), convert (HF -> f16 GGUF), quantize, onnx, check (round trip
against the source), manifest. Everything is built in `OUT.partial-XXXX` beside OUT and renamed
to OUT only at the end, so an interrupted or failed export never leaves a folder that looks
complete; a failing stage raises a UserError naming the stage and the cause.

Example: `export("smollm2-135m-instruct-q4_1", "bundles/smol", ExportOptions(target_quant="Q8_0"))`
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from edge_spec.config.settings import EXPORT_FORMATS, ONNX_EXPORTERS, ONNX_QUANTS, ExportSettings
from edge_spec.errors import UserError
from edge_spec.export import stages
from edge_spec.export.bundle import BundleFile, CheckResult, Manifest, tokenizer_info
from edge_spec.export.progress import Reporter, make_reporter
from edge_spec.export.quantize import quant_name
from edge_spec.fsutil import install_sigterm_handler, temp_dir
from edge_spec.store.checkpoint import check_hf_checkpoint
from edge_spec.store.models import resolve
from edge_spec.store.validate import check_gguf

STAGES = ("load", "pair", "convert", "quantize", "onnx", "check", "manifest")
FORMATS = EXPORT_FORMATS


ExportOptions = ExportSettings  # the settings tree's export section


@dataclass(frozen=True)
class Source:
    """A resolved model source: a Hugging Face folder or a GGUF file."""

    kind: str  # "hf" | "gguf"
    path: Path
    label: str


@dataclass(frozen=True)
class StageStat:
    name: str
    seconds: float
    bytes: int


@dataclass(frozen=True)
class ExportResult:
    out: Path
    manifest: Manifest
    stages: tuple[StageStat, ...]
    warnings: tuple[str, ...] = ()
    steps: tuple[StageStat, ...] = ()  # per model within a stage: "quantize: drafter copy -> Q8_0"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self.manifest)
        d.update(
            out=str(self.out),
            stages=[asdict(s) for s in self.stages],
            steps=[asdict(s) for s in self.steps],
            warnings=list(self.warnings),
        )
        return d


def resolve_source(text: str) -> Source:
    """A checkpoint folder (safetensors only), a GGUF path, or a store name."""
    path = Path(text).expanduser()
    if path.is_dir():
        return Source("hf", check_hf_checkpoint(path), text)
    path = resolve(text)
    check_gguf(path)  # refuses a file that is not a sound GGUF, naming the problem
    return Source("gguf", path, text)


def check_options(opts: ExportOptions) -> ExportOptions:
    """Normalised options, or a UserError for a bad combination."""
    bad = [f for f in opts.formats if f not in FORMATS]
    if bad or not opts.formats:
        raise UserError(
            f"unknown --format {','.join(bad) or '(none)'}: use gguf, onnx or gguf,onnx"
        )
    if opts.drafter and opts.self_drafter:
        raise UserError("pass either --drafter SOURCE or --self-drafter QUANT, not both")
    if opts.onnx_quant not in ONNX_QUANTS or opts.onnx_exporter not in ONNX_EXPORTERS:
        raise UserError(
            f"--onnx-quant must be one of {', '.join(ONNX_QUANTS)} and "
            f"--onnx-exporter one of {', '.join(ONNX_EXPORTERS)}"
        )
    tq, dq = quant_name(opts.target_quant), quant_name(opts.drafter_quant)
    sq = quant_name(opts.self_drafter) if opts.self_drafter else None
    if sq == tq:
        raise UserError(
            f"--self-drafter {sq} is the target's own quantization; pick a "
            "lower-bit one (e.g. Q4_0 or Q2_K) so drafting is cheaper"
        )
    return replace(opts, target_quant=tq, drafter_quant=sq or dq, self_drafter=sq)


def export(
    source: str,
    out: str | os.PathLike[str],
    opts: ExportOptions | None = None,
    progress: bool = True,
) -> ExportResult:
    """Run every stage into `OUT.partial-XXXX` and rename it to `out` when all succeeded."""
    opts = check_options(opts or ExportOptions())
    out = Path(out).expanduser()
    if out.exists():
        raise UserError(f"{out} already exists: remove it or choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    restore = install_sigterm_handler()  # SIGTERM unwinds through the cleanup below
    tmp = temp_dir(out.parent, f"{out.name}.partial-")
    run: _Run | None = None
    try:
        run = _Run(opts, tmp, make_reporter(progress))
        _quiet_libraries()
        manifest = run.all_stages(source)
        try:
            os.rename(tmp, out)  # the one step that makes the bundle visible under its name
        except OSError as exc:
            raise UserError(
                f"could not move the finished bundle to {out} ({exc}); choose another --out"
            ) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if run is not None:
            run.reporter.close()
        restore()
    return ExportResult(out, manifest, tuple(run.stats), tuple(run.warnings), tuple(run.steps))


class _Run:
    """State shared by the stages of one export."""

    def __init__(self, opts: ExportOptions, tmp: Path, reporter: Reporter) -> None:
        self.opts, self.tmp, self.reporter = opts, tmp, reporter
        self.work = tmp / ".work"  # intermediates, deleted before the rename
        self.work.mkdir()
        self.stats: list[StageStat] = []
        self.steps: list[StageStat] = []
        self.warnings: list[str] = []
        self.files: list[BundleFile] = []
        self.checks: list[CheckResult] = []
        self.made: dict[tuple[str, str], Path] = {}  # (role, format) -> output
        self.inputs: dict[Path, Path] = {}  # HF source -> its converted GGUF
        self.copied: set[str] = set()  # roles whose GGUF is the source file, byte for byte
        self.hf_dirs: dict[Path, Path] = {}  # GGUF source -> its dequantized HF folder
        self.quants: dict[str, str] = {}  # role -> GGUF quant
        self.onnx_quants: dict[str, str] = {}  # role -> ONNX quant
        self.made_by: dict[tuple[str, str], tuple[str, str]] = {}  # -> (architecture, converter)

    @contextlib.contextmanager
    def stage(self, name: str, detail: str = "") -> Iterator[list[int]]:
        """Time a stage, count its output bytes, and name it in any error."""
        self.reporter.start(name, detail)
        t0, written = time.perf_counter(), [0]
        try:
            yield written
        except UserError as exc:
            raise UserError(f"export stage '{name}' failed: {exc}") from exc
        except Exception as exc:
            if os.environ.get("EDGE_SPEC_DEBUG"):
                raise
            raise UserError(
                f"export stage '{name}' failed: {type(exc).__name__}: "
                f"{' '.join(str(exc).split())[:300]}"
            ) from exc
        dt = time.perf_counter() - t0
        self.stats.append(StageStat(name, round(dt, 3), written[0]))
        size = f", {written[0] / 1e6:.1f} MB" if written[0] else ""
        self.reporter.finish(name, f"{dt:.1f} s{size}")

    def all_stages(self, text: str) -> Manifest:
        o = self.opts
        with self.stage("load", text):
            target = resolve_source(text)
            drafter = resolve_source(o.drafter) if o.drafter else None
        with self.stage("pair", "tokenizers of target and drafter"):
            vocab = stages.pair_sources(target, drafter)
        needs_gguf = "gguf" in o.formats
        if needs_gguf and (target.kind == "hf" or (drafter and drafter.kind == "hf")):
            with self.stage("convert", "Hugging Face -> GGUF") as w:
                w[0] = stages.convert(self, target, drafter)
        else:
            self.reporter.skip("convert", "GGUF source" if needs_gguf else "no GGUF output")
        if needs_gguf:
            with self.stage("quantize", _quant_detail(o)) as w:
                w[0] = stages.quantize(self, target, drafter)
        else:
            self.reporter.skip("quantize", "no GGUF output")
        if "onnx" in o.formats:
            with self.stage("onnx", f"{o.onnx_exporter} {o.onnx_quant} ({o.onnx_provider})") as w:
                w[0] = stages.onnx(self, target, drafter)
        else:
            self.reporter.skip("onnx", "not requested")
        if o.check:
            with self.stage("check", f"greedy {o.check_tokens} tokens vs source"):
                stages.check(self, target, drafter)
        else:
            self.reporter.skip("check", "--no-check")
        with self.stage("manifest", "hash files, write edge-spec.toml") as w:
            manifest = stages.manifest(self, target, drafter, vocab)
            w[0] = sum(f.size for f in manifest.files)
        return manifest

    def record(self, stage: str, what: str, t0: float, nbytes: int) -> int:
        """Note one model's step (time since `t0`, bytes written); returns `nbytes`."""
        self.steps.append(StageStat(f"{stage}: {what}", round(time.perf_counter() - t0, 3), nbytes))
        return nbytes

    def warn(self, text: str) -> None:
        self.warnings.append(text)


def _quiet_libraries() -> None:
    """Turn off transformers' own tqdm bars: they would tear through the stage display."""
    with contextlib.suppress(ImportError):
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


def _quant_detail(o: ExportOptions) -> str:
    drafter = o.self_drafter or (o.drafter_quant if o.drafter else None)
    return f"target {o.target_quant}" + (f", drafter {drafter}" if drafter else "")


__all__ = [
    "ExportOptions",
    "ExportResult",
    "Source",
    "StageStat",
    "check_options",
    "export",
    "resolve_source",
    "tokenizer_info",
]

"""`edge-spec bench`: the side-by-side benchmark command."""

from __future__ import annotations

import datetime as _dt
import sys
from pathlib import Path
from typing import Any

import click

from edge_spec.bench.bench import Peers, RunOptions, machine, summarize
from edge_spec.bench.bench import bench as run_bench
from edge_spec.bench.modes import load_tasks, parse_modes
from edge_spec.bench.outcome import outcome_table
from edge_spec.bench.peers import PldPeer
from edge_spec.bench.peers_server import LlamaServerPeer, server_binary
from edge_spec.bench.report import task_set, write_plots, write_results
from edge_spec.cli.options import chosen_guard, guard_options, model_options, runtime_options
from edge_spec.cli.output import emit_json, note_profile
from edge_spec.config.settings import APPLY_ENGINES, LAZY_POLICIES
from edge_spec.engine import build_engine


@click.command()
@click.option(
    "--tasks",
    "tasks_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="JSONL task file (apply tasks or {'prompt': ...} lines).",
)
@click.option("--limit", type=click.IntRange(1), default=None, help="First N tasks only.")
@click.option("--skip", type=click.IntRange(0), default=0, help="Skip the first N tasks.")
@click.option(
    "--modes",
    default="plain,spec-adaptive,spec-fixed-8,llamacpp-pld",
    show_default=True,
    help="Comma list: plain, spec-adaptive[-reference|-model|-hybrid], spec-fixed-K, "
    "spec-model-fixed-K, llamacpp-pld[-N], hf-plain, hf-pld[-N], hf-assisted "
    "(hf-* speedups are over hf-plain: list it too).",
)
@click.option("--repeat", type=click.IntRange(1), default=1, show_default=True)
@click.option("--template", default=None, help="Apply prompt template (default: from the model).")
@click.option(
    "--engine",
    "apply_engine",
    type=click.Choice(APPLY_ENGINES),
    default="model",
    show_default=True,
    help="Apply engine for our modes: model (speed: the model writes every file), auto "
    "(accuracy: the structural merge where it is sure) or merge.",
)
@click.option(
    "--on-lazy",
    type=click.Choice(LAZY_POLICIES),
    default=None,
    help="When the model's answer holds '... existing code ...' markers: keep it, "
    "write the naive merge instead, or refuse (default: naive, as `edge-spec "
    "run` writes files, except keep with --engine model, whose speed runs "
    "compare the answers as written).",
)
@click.option(
    "--no-baseline",
    is_flag=True,
    help="Do not add the plain mode (accuracy runs; no speedups then).",
)
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False), default="bench-out", show_default=True
)
@click.option(
    "--max-tokens", type=click.IntRange(1), default=None, help="Cap output tokens per task."
)
@model_options
@runtime_options
@guard_options
@click.option(
    "--llama-server",
    "llama_server",
    default=None,
    type=click.Path(dir_okay=False),
    help="llama.cpp's llama-server binary for the llama-server* modes (default: $LLAMA_SERVER).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
def bench(**o: Any) -> None:
    """Benchmark plain decoding, edge-spec and peers side by side; JSON + Markdown + PNG."""
    modes = parse_modes(o["modes"], baseline=not o["no_baseline"])
    tasks = load_tasks(o["tasks_path"], o["limit"], o["skip"])
    engine = build_engine(
        o["model"],
        o["drafter"],
        profile=o["profile"],
        draft=o["draft"],
        n_ctx=o["n_ctx"],
        threads=o["threads"],
        n_gpu_layers=o["n_gpu_layers"],
        runtime=o["runtime"],
        bundle=o["bundle"],
        verify_bundle=o["verify"],
        pool=o["pool"],
    )
    note_profile(engine.profile_label, o["profile"])
    # The llama.cpp peers only compare fairly with a llama.cpp baseline. Only they load the
    # target here: an apply the merge answers alone never does.
    rt = engine.config.runtime
    llamacpp_peers = any(m.peer in ("pld", "llama-server") for m in modes)
    path = engine.target.path if llamacpp_peers and rt.backend == "llamacpp" else None
    peers = Peers()
    if path and any(m.peer == "pld" for m in modes):
        peers.pld = PldPeer(path, rt.n_ctx, rt.threads)
    if any(m.peer == "llama-server" for m in modes):
        binary = server_binary(o["llama_server"])
        if binary is None or path is None:
            click.echo(
                "skipping the llama-server modes: no llama-server binary (pass "
                "--llama-server PATH or set $LLAMA_SERVER) or no GGUF target",
                err=True,
            )
            modes = [m for m in modes if m.peer != "llama-server"]
        else:
            drafter = engine.drafter_path
            peers.server = LlamaServerPeer(binary, path, rt.n_ctx, rt.threads, drafter)
    guard = chosen_guard(o["guard"], o["no_guard"]) or engine.config.apply.guard
    on_lazy = o["on_lazy"] or ("keep" if o["apply_engine"] == "model" else "naive")
    opts = RunOptions(o["max_tokens"], o["template"], o["apply_engine"], guard, on_lazy)
    total = len(tasks) * len(modes) * o["repeat"]
    try:
        records = _with_progress(
            total, lambda cb: run_bench(engine, tasks, modes, o["repeat"], opts, peers, cb)
        )
    finally:
        if peers.server is not None:
            peers.server.close()
    summary = summarize(records)
    out = Path(o["out_dir"])
    meta = {
        "command": "edge-spec " + " ".join(sys.argv[1:]),
        "tasks": o["tasks_path"],
        "n_tasks": len(tasks),
        "repeat": o["repeat"],
        "model": engine.model_name,
        "drafter": engine.drafter_name,
        "threads": rt.threads or "all",
        "profile": engine.profile_label,
        "template": o["template"] or "from the model",
        "engine": o["apply_engine"],
        "guard": guard,
        "on_lazy": on_lazy,
        "machine": machine(),
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
    }
    write_results(out, records, summary, meta)
    focus = next((m.name for m in modes if m.name.startswith("spec-adaptive")), modes[-1].name)
    write_plots(out, records, focus)
    if o["as_json"]:
        outcomes = {task_set(o["tasks_path"]): outcome_table(records)}
        emit_json({"summary": summary, "outcomes": outcomes, "out": str(out)})
    else:
        click.echo((out / "summary.md").read_text())


def _with_progress(total: int, work: Any) -> Any:
    try:
        from rich.progress import Progress
    except ImportError:
        return work(None)
    from rich.console import Console

    with Progress(console=Console(stderr=True), transient=False) as prog:
        tid = prog.add_task("bench", total=total)

        def cb(what: str) -> None:
            prog.update(tid, advance=1, description=what)

        return work(cb)

"""`edge-spec calibrate`: measure this machine's verify-cost curve into a profile."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from edge_spec.bench.calibrate import calibrate
from edge_spec.cli.output import emit_json, int_range
from edge_spec.config.profiles import user_dir
from edge_spec.config.settings import BACKENDS, DEMO_DRAFTER, DEMO_TARGET, RuntimeSettings
from edge_spec.fsutil import write_text
from edge_spec.store.models import resolve


@click.command("calibrate")
@click.option(
    "--model",
    default=None,
    help="Target model: catalogue name or .gguf path (default: the demo target).",
)
@click.option(
    "--drafter",
    default=None,
    help="Drafter model (default: the demo drafter with the demo target; 'none' to skip).",
)
@click.option(
    "--threads",
    type=int_range(RuntimeSettings, "threads"),
    default=0,
    show_default=True,
    help="CPU threads (0: all cores).",
)
@click.option(
    "--n-gpu-layers",
    type=int,
    default=0,
    show_default=True,
    help="Layers to offload to the GPU (-1: all).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Profile file to write (default: the store's profiles/local.toml).",
)
@click.option("--name", default=None, help="Profile name (default: the --out file's stem).")
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON on stdout.")
@click.option(
    "--runtime",
    type=click.Choice(BACKENDS),
    default="llamacpp",
    show_default=True,
    help="Backend to measure (ort/torch take model folders).",
)
@click.option("--quick", is_flag=True, help="Skip n=128 (extrapolated) for a faster run.")
def calibrate_cmd(**o: Any) -> None:
    """Measure verify costs (n = 1..128 tokens per forward) and the drafter's cost."""
    out = Path(o["out"]) if o["out"] else user_dir() / "local.toml"
    drafter = o["drafter"]
    if drafter is not None and drafter.lower() == "none":
        drafter = ""
    # Pull missing models first, with their own progress bar (rich allows one live display).
    for m in (
        o["model"] or DEMO_TARGET,
        (drafter or DEMO_DRAFTER) if drafter or (drafter is None and o["model"] is None) else None,
    ):
        if m is not None and not Path(m).expanduser().is_dir():
            resolve(m)
    with _progress() as report:
        prof = calibrate(
            o["model"],
            drafter,
            threads=o["threads"],
            n_gpu_layers=o["n_gpu_layers"],
            quick=o["quick"],
            name=o["name"] or out.stem,
            report=report,
            runtime=o["runtime"],
        )
    write_text(out, prof.to_toml())
    if o["as_json"]:
        d = prof.to_dict()
        d["path"] = str(out)
        emit_json(d)
        return
    c = prof.costs
    click.echo(f"wrote {out}", err=True)
    click.echo("  n      ms   ms/token", err=True)
    for n, ms in c.verify_ms.items():
        click.echo(f"{n:>3} {ms:>7.1f} {ms / n:>10.2f}", err=True)
    click.echo(
        f"prefill {c.prefill_ms_per_token:.2f} ms/token, drafter ratio {c.drafter_ratio:.3f}",
        err=True,
    )
    if out.parent.resolve() == user_dir().resolve():
        click.echo(
            "run, serve and bench use it on this machine for this target when no "
            "--profile is given",
            err=True,
        )
    else:
        click.echo(f"use it with: edge-spec run --profile {out}", err=True)


@contextlib.contextmanager
def _progress() -> Iterator[Any]:
    """A rich progress bar on stderr, or a no-op reporter without rich."""
    try:
        from rich import progress as rp
        from rich.console import Console
    except ImportError:
        yield lambda _d, _done, _total: None
        return
    bar = rp.Progress(
        rp.TextColumn("{task.description:<24}"),
        rp.BarColumn(),
        rp.MofNCompleteColumn(),
        rp.TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task("calibrate", total=None)

    def report(desc: str, done: int, total: int) -> None:
        bar.update(task, description=desc, completed=done, total=total)

    with bar:
        yield report

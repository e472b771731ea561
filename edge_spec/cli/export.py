"""`edge-spec export`: a model (+ drafter) -> a bundle of GGUF and/or ONNX files with a manifest."""

from __future__ import annotations

from typing import Any

import click

from edge_spec.cli.output import emit_json, int_range
from edge_spec.config.settings import ONNX_EXPORTERS, ONNX_QUANTS, ONNX_TARGETS, ExportSettings
from edge_spec.export.pipeline import ExportOptions, export


@click.command("export")
@click.argument("source")
@click.option(
    "--drafter",
    default=None,
    help="Drafter SOURCE (HF folder, .gguf or store name; same tokenizer as the target).",
)
@click.option(
    "--self-drafter",
    "self_drafter",
    default=None,
    metavar="QUANT",
    help="Use the target itself at this GGUF quant as the drafter (e.g. Q4_0).",
)
@click.option(
    "--format",
    "formats",
    default="gguf",
    show_default=True,
    help="Comma list of output formats: gguf, onnx.",
)
@click.option(
    "--target-quant",
    default=ExportSettings.target_quant,
    show_default=True,
    help="GGUF quant of the target.",
)
@click.option(
    "--drafter-quant",
    default=ExportSettings.drafter_quant,
    show_default=True,
    help="GGUF quant of the drafter.",
)
@click.option(
    "--onnx-quant",
    type=click.Choice(ONNX_QUANTS),
    default=ExportSettings.onnx_quant,
    show_default=True,
    help="ONNX weight quantization.",
)
@click.option(
    "--onnx-exporter",
    type=click.Choice(ONNX_EXPORTERS),
    default=ExportSettings.onnx_exporter,
    show_default=True,
    help="onnxruntime-genai's model builder, or optimum (own extra).",
)
@click.option(
    "--onnx-provider",
    type=click.Choice(ONNX_TARGETS),
    default=ExportSettings.onnx_provider,
    show_default=True,
    help="Execution provider the ONNX model is built for.",
)
@click.option(
    "--check/--no-check",
    default=True,
    show_default=True,
    help="Round-trip check: greedy tokens of each export vs its source.",
)
@click.option("--profile", default="", help="Record this profile as the bundle's recommended one.")
@click.option(
    "--threads", type=int_range(ExportSettings, "threads"), default=0, help="CPU threads (0: all)."
)
@click.option(
    "--out", required=True, type=click.Path(file_okay=False), help="Bundle folder to create."
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the result as one JSON object on stdout."
)
@click.option("--quiet", "-q", is_flag=True, help="No progress display on stderr.")
def export_cmd(source: str, **o: Any) -> None:
    """Export SOURCE (HF checkpoint folder, .gguf file or store name) into a bundle."""
    formats = tuple(f.strip().lower() for f in o["formats"].split(",") if f.strip())
    opts = ExportOptions(
        formats=formats,
        drafter=o["drafter"],
        self_drafter=o["self_drafter"],
        target_quant=o["target_quant"],
        drafter_quant=o["drafter_quant"],
        onnx_quant=o["onnx_quant"],
        onnx_exporter=o["onnx_exporter"],
        onnx_provider=o["onnx_provider"],
        check=o["check"],
        threads=o["threads"],
        profile=o["profile"],
    )
    result = export(source, o["out"], opts, progress=not o["quiet"])
    for w in result.warnings:
        click.echo(f"warning: {w}", err=True)
    if o["as_json"]:
        emit_json(result.to_dict())
        return
    if not o["quiet"]:
        _summary(result)


def _summary(result: Any) -> None:
    """Files and check results as a short table on stderr."""
    m = result.manifest
    click.echo(f"bundle {result.out}", err=True)
    for f in m.files:
        if f.format != "onnx" or f.path.endswith((".onnx", "genai_config.json")):
            click.echo(
                f"  {f.role:<9} {f.format:<9} {f.quant or '-':<7} "
                f"{f.size / 1e6:>9.1f} MB  {f.path}",
                err=True,
            )
    for c in m.checks:
        diff = f", max logit diff {c.max_logit_diff:.2f}" if c.max_logit_diff >= 0 else ""
        click.echo(
            f"  check {c.path}: {c.agreement:.0%} of {c.tokens} greedy tokens agree"
            f"{diff} (vs {c.reference})",
            err=True,
        )
    click.echo(f"run it: edge-spec run --bundle {result.out} --prompt '...'", err=True)

"""`edge-spec profiles list|show`: the hardware profiles edge-spec knows."""

from __future__ import annotations

import json
from typing import Any

import click

from edge_spec.config.profiles import load_profile, profile_names, shipped_dir


@click.group("profiles")
def profiles() -> None:
    """List and show hardware profiles (runtime, drafter, controller, cost table)."""


def _row(name: str, path: Any) -> dict[str, Any]:
    prof = load_profile(path)
    c = prof.costs
    return {
        "name": name,
        "shipped": path.parent == shipped_dir(),
        "path": str(path),
        "source": c.source,
        "machine": c.machine,
        "description": prof.description,
        "verify_ms_1": c.verify_ms[1],
        "verify_ms_64": c.verify_ms[64],
        "drafter_ratio": c.drafter_ratio,
    }


@profiles.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list on stdout.")
def list_cmd(as_json: bool) -> None:
    """Shipped profiles, then profiles written by `edge-spec calibrate` to the store."""
    rows = [_row(name, path) for name, path in profile_names()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    cells = [["name", "source", "1 tok ms", "64 tok ms", "drafter", "description"]]
    for r in rows:
        cells.append(
            [
                r["name"] + ("" if r["shipped"] else " (user)"),
                r["source"],
                f"{r['verify_ms_1']:.1f}",
                f"{r['verify_ms_64']:.1f}",
                f"{r['drafter_ratio']:.2f}",
                r["description"],
            ]
        )
    widths = [max(len(c[i]) for c in cells) for i in range(5)]
    for c in cells:
        click.echo("  ".join(c[i].ljust(widths[i]) for i in range(5)) + "  " + c[5])


@profiles.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON on stdout.")
def show_cmd(name: str, as_json: bool) -> None:
    """Show profile NAME (a shipped or calibrated name, or a .toml path)."""
    prof = load_profile(name)
    if as_json:
        click.echo(json.dumps(prof.to_dict(), indent=2))
        return
    click.echo(f"# {prof.path}")
    click.echo(prof.to_toml(), nl=False)
    c = prof.costs
    click.echo(
        "\n# ms per token: " + ", ".join(f"{n}: {ms / n:.2f}" for n, ms in c.verify_ms.items())
    )

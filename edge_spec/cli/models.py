"""`edge-spec models ...`: list the model catalogue and fetch models into the store.

UserError is not handled here: the main CLI group turns it into `error: <msg>` and exit 2.
"""

from __future__ import annotations

import json

import click

from edge_spec.store.models import list_models, pull, store_root


@click.group("models")
def models() -> None:
    """List and fetch the models edge-spec knows by name."""


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list on stdout.")
def list_cmd(as_json: bool) -> None:
    """Show the catalogue and which models are already in the store."""
    rows = list_models()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        _plain_table(rows)
    else:
        table = Table()
        for header in ("name", "aliases", "size", "present"):
            # Names get copied into commands, so never truncate them; the description wraps.
            table.add_column(header, no_wrap=True)
        table.add_column("description", overflow="fold")
        for row in rows:
            table.add_row(*_cells(row))
        console = Console()
        console.print(table)
        console.print(f"store: {store_root() / 'models'}")


def _cells(row: dict[str, object]) -> list[str]:
    size = row["size"]
    return [
        str(row["name"]),
        ", ".join(row["aliases"]),  # type: ignore[arg-type]
        f"{size / 1e6:.0f} MB" if isinstance(size, int) else "?",
        "yes" if row["present"] else "no",
        str(row["description"]),
    ]


def _plain_table(rows: list[dict[str, object]]) -> None:
    cells = [["name", "aliases", "size", "present", "description"], *(_cells(r) for r in rows)]
    # The description is last and unpadded so long ones do not widen every line.
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    for c in cells:
        click.echo("  ".join(c[i].ljust(widths[i]) for i in range(4)) + "  " + c[4])
    click.echo(f"store: {store_root() / 'models'}")


@models.command("pull")
@click.argument("name")
@click.option("--verify", is_flag=True, help="Re-hash the file even if it was verified before.")
def pull_cmd(name: str, verify: bool) -> None:
    """Fetch NAME (a catalogue name, alias, or hf:ORG/REPO/FILE) and print its path."""
    click.echo(str(pull(name, verify=verify)))

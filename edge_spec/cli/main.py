"""The `edge-spec` command line: models, run (and more as they land)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from edge_spec.cli.bench import bench
from edge_spec.cli.calibrate import calibrate_cmd
from edge_spec.cli.export import export_cmd
from edge_spec.cli.inspect import inspect_cmd
from edge_spec.cli.models import models
from edge_spec.cli.profiles import profiles
from edge_spec.cli.run import run
from edge_spec.cli.serve import serve
from edge_spec.errors import UserError
from edge_spec.fsutil import install_sigterm_handler


class _Group(click.Group):
    """Prints a UserError as one line and exits 2; no traceback for things the user can fix."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UserError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)


@click.group(cls=_Group)
@click.version_option(package_name="edge-spec")
def main() -> None:
    """Lossless adaptive speculative decoding for small specialist LLMs (code apply first)."""
    click.get_current_context().call_on_close(install_sigterm_handler())


def _register() -> None:
    main.add_command(models)
    main.add_command(run)
    main.add_command(serve)
    main.add_command(bench)
    main.add_command(calibrate_cmd)
    main.add_command(profiles)
    main.add_command(export_cmd)
    main.add_command(inspect_cmd)


_register()


def emit_json(obj: dict[str, Any]) -> None:
    """One JSON object on stdout: the machine contract."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":  # pragma: no cover
    main()

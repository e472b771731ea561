"""The `edge-spec` command line: one module per command."""

from edge_spec.cli.main import main

__all__ = ["main"]

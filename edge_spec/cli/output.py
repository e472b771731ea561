"""Output helpers shared by the commands, and click types built from the settings tree."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from edge_spec.config.settings import bounds


def emit_json(obj: dict[str, Any]) -> None:
    """One JSON object on stdout: the machine contract."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def int_range(cls: type, name: str) -> click.IntRange:
    """A click type with the bounds the settings tree gives `cls.name`."""
    lo, hi = bounds(cls, name)
    return click.IntRange(None if lo is None else int(lo), None if hi is None else int(hi))


def float_range(cls: type, name: str) -> click.FloatRange:
    lo, hi = bounds(cls, name)
    return click.FloatRange(lo, hi)

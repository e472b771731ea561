"""Output helpers shared by the commands, and click types built from the settings tree."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from edge_spec.config.local import BUILTIN_PROFILE, NO_PROFILE
from edge_spec.config.settings import bounds

F = TypeVar("F", bound=Callable[..., Any])


def emit_json(obj: dict[str, Any]) -> None:
    """One JSON object on stdout: the machine contract."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def note_profile(label: str, named: str | None) -> None:
    """On stderr, the profile the engine chose itself (a calibrated one, a bundle's)."""
    if named is None and label != BUILTIN_PROFILE:
        click.echo(
            f"using profile {label}; --profile NAME picks another, --profile "
            f"{NO_PROFILE} the built-in defaults",
            err=True,
        )


def int_range(cls: type, name: str) -> click.IntRange:
    """A click type with the bounds the settings tree gives `cls.name`."""
    lo, hi = bounds(cls, name)
    return click.IntRange(None if lo is None else int(lo), None if hi is None else int(hi))


def float_range(cls: type, name: str) -> click.FloatRange:
    lo, hi = bounds(cls, name)
    return click.FloatRange(lo, hi)

"""The options `run`, `serve` and `bench` share, declared once with one default each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from edge_spec.cli.output import float_range, int_range
from edge_spec.config.settings import (
    BACKENDS,
    DRAFT_MODES,
    GUARD_MODES,
    ApplySettings,
    GuardMode,
    PoolSettings,
    RuntimeSettings,
    ServerSettings,
)

F = TypeVar("F", bound=Callable[..., Any])


def _stack(fn: F, opts: list[Callable[[F], F]]) -> F:
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def model_options(fn: F) -> F:
    """The model selection (--model ... --draft)."""
    return _stack(
        fn,
        [
            click.option(
                "--model",
                default=None,
                help="Target model: catalogue name, .gguf path or hf:ORG/REPO/FILE "
                "(default: the demo target).",
            ),
            click.option(
                "--drafter",
                default=None,
                help="Drafter model (same tokenizer as the target; default: the demo "
                "drafter with the demo target).",
            ),
            click.option(
                "--bundle",
                default=None,
                type=click.Path(file_okay=False),
                help="An `edge-spec export` bundle: its target, drafter and runtime (flags win).",
            ),
            click.option(
                "--verify",
                is_flag=True,
                help="With --bundle: re-hash every file, not only changed ones.",
            ),
            click.option(
                "--draft",
                type=click.Choice(DRAFT_MODES),
                default=None,
                help="Drafting: hybrid (default), reference, model or none (plain decoding).",
            ),
            click.option(
                "--pool/--no-pool",
                default=None,
                help="Draft also from the engine's earlier outputs (a pool per engine and "
                "user, kept in memory; default: "
                f"{'on' if PoolSettings.use_pool else 'off'}).",
            ),
        ],
    )


def runtime_options(fn: F) -> F:
    """Where and how the target runs (--runtime, --profile, --threads, --n-ctx, --n-gpu-layers);
    each defaults to the profile's value, else the settings tree's."""
    return _stack(
        fn,
        [
            click.option(
                "--runtime",
                type=click.Choice(BACKENDS),
                default=None,
                help="Backend: llamacpp (GGUF), ort (ONNX folder) or torch (HF folder or "
                "GGUF); default: the profile's, else llamacpp.",
            ),
            click.option(
                "--profile",
                envvar="EDGE_SPEC_PROFILE",
                default=None,
                help="Hardware profile: shipped/calibrated name or .toml path (env "
                "EDGE_SPEC_PROFILE; default: the one `edge-spec calibrate` measured "
                "here for this target, else built-in; 'none': built-in); flags "
                "override it.",
            ),
            click.option(
                "--threads",
                type=int_range(RuntimeSettings, "threads"),
                default=None,
                help="CPU threads (0: all; default: the profile's).",
            ),
            click.option(
                "--n-ctx",
                type=int_range(RuntimeSettings, "n_ctx"),
                default=None,
                help=f"Context size (default: the profile's, else {RuntimeSettings.n_ctx}).",
            ),
            click.option(
                "--n-gpu-layers",
                type=int,
                default=None,
                help="Layers to offload to the GPU (default: the profile's).",
            ),
        ],
    )


def guard_options(fn: F) -> F:
    """The decode-time apply guard (--guard, --no-guard)."""
    return _stack(
        fn,
        [
            click.option(
                "--guard",
                type=click.Choice(GUARD_MODES),
                default=None,
                help="Code apply: what the model may write (part of the target): order: "
                "only lines of the original and the snippet, in their order; lines: "
                "those lines in any order; markers: anything but marker lines the "
                "original lacks; off: anything. Default: the request's, else "
                f"{ApplySettings.guard}.",
            ),
            click.option("--no-guard", is_flag=True, help="The same as --guard off."),
        ],
    )


def chosen_guard(guard: GuardMode | None, no_guard: bool) -> GuardMode | None:
    """The guard the options name (None: the engine's default)."""
    return "off" if no_guard else guard


def _server_limit(flag: str, field: str, help_text: str) -> Callable[[F], F]:
    """An option for one `ServerSettings` bound, its default and range taken from there."""
    is_int = isinstance(getattr(ServerSettings, field), int)
    kind = int_range if is_int else float_range
    return click.option(
        flag,
        field,
        type=kind(ServerSettings, field),
        default=getattr(ServerSettings, field),
        show_default=True,
        metavar="N" if is_int else "SECONDS",
        help=help_text,
    )


def connection_options(fn: F) -> F:
    """How long a client may take and how many may connect (`serve`)."""
    return _stack(
        fn,
        [
            _server_limit(
                "--header-timeout",
                "header_timeout_s",
                "The request line and headers must arrive within this; else 408.",
            ),
            _server_limit(
                "--body-timeout",
                "body_timeout_s",
                "The whole request body must arrive within this; else 408.",
            ),
            _server_limit(
                "--keep-alive", "keep_alive_s", "An idle keep-alive connection closes after this."
            ),
            _server_limit(
                "--max-connections",
                "max_connections",
                "Open sockets at most; a new one past this gets 503 and is closed.",
            ),
        ],
    )

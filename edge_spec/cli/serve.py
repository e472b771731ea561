"""`edge-spec serve`: the OpenAI-compatible server (FastAPI + uvicorn, extra `serve`)."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import click

from edge_spec.cli.options import (
    chosen_guard,
    connection_options,
    guard_options,
    model_options,
    runtime_options,
)
from edge_spec.cli.output import int_range, note_profile
from edge_spec.config.settings import (
    ClusterSettings,
    ServerSettings,
)
from edge_spec.engine import Engine, build_engine
from edge_spec.errors import UserError, require


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    """Repeated options, each of which may also list several values separated by commas."""
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


def engine_options(o: dict[str, Any]) -> dict[str, Any]:
    """`build_engine` keyword arguments from the command-line options."""
    return {
        "model": o["model"],
        "drafter": o["drafter"],
        "profile": o.get("profile"),
        "draft": o["draft"],
        "n_ctx": o["n_ctx"],
        "threads": o["threads"],
        "n_gpu_layers": o["n_gpu_layers"],
        "runtime": o.get("runtime"),
        "bundle": o.get("bundle"),
        "verify_bundle": bool(o.get("verify")),
        "guard": chosen_guard(o.get("guard"), bool(o.get("no_guard"))),
        "pool": o.get("pool"),
    }


def engine_factory(o: dict[str, Any]):  # noqa: ANN201 - returns a callable
    """A callable that builds the Engine from the command-line options (run at server start)."""

    def build() -> Engine:
        engine = build_engine(**engine_options(o))
        note_profile(engine.profile_label, o.get("profile"))
        return engine

    return build


def serve_cluster(o: dict[str, Any], settings: ServerSettings) -> None:
    """`--cluster`: deploy engine replicas on Ray Serve (extra `cluster`); blocks until Ctrl-C."""
    require("ray", "cluster")
    # Ray is a heavy optional extra: imported only for --cluster.
    from edge_spec.server.cluster import start

    opts = {k: v for k, v in engine_options(o).items() if v is not None}
    opts.pop("threads", None)  # per replica: ClusterSettings.threads
    cluster = ClusterSettings(
        replicas=o["replicas"],
        address=o["address"],
        threads=o["threads"] if o["threads"] is not None else 1,
    )
    start(opts, cluster, settings, blocking=True)


@click.command()
@model_options
@runtime_options
@guard_options
@click.option(
    "--host", default=ServerSettings.host, show_default=True, help="Address to listen on."
)
@click.option(
    "--port", type=int_range(ServerSettings, "port"), default=ServerSettings.port, show_default=True
)
@click.option(
    "--api-key",
    envvar="EDGE_SPEC_API_KEY",
    default=None,
    show_envvar=True,
    help="Require 'Authorization: Bearer KEY' on /v1/* (/health stays open).",
)
@click.option(
    "--max-queue",
    type=int_range(ServerSettings, "max_queue"),
    default=ServerSettings.max_queue,
    show_default=True,
    help="Requests running or waiting at once; more get 503 + Retry-After.",
)
@click.option(
    "--max-body-bytes",
    type=int_range(ServerSettings, "max_body_bytes"),
    default=ServerSettings.max_body_bytes,
    show_default=True,
    help="Largest request body; larger gets 413.",
)
@connection_options
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    envvar="EDGE_SPEC_ALLOWED_HOSTS",
    show_envvar=True,
    metavar="NAME",
    help="A Host header to accept besides loopback names and --host (repeatable; "
    "'*.lan' patterns; '*': any). Needed for clients that reach a non-loopback "
    "--host by name.",
)
@click.option(
    "--allowed-origin",
    "allowed_origins",
    multiple=True,
    envvar="EDGE_SPEC_ALLOWED_ORIGINS",
    show_envvar=True,
    metavar="ORIGIN",
    help="A browser origin allowed to call the API besides pages on this machine "
    "(repeatable; patterns such as 'vscode-webview://*'); others get 403.",
)
@click.option(
    "--cluster",
    is_flag=True,
    help="Serve on Ray Serve: engine replicas across a Ray cluster (extra `cluster`).",
)
@click.option(
    "--replicas",
    type=int_range(ClusterSettings, "replicas"),
    default=ClusterSettings.replicas,
    show_default=True,
    help="With --cluster: engine replicas (each one engine, --threads threads).",
)
@click.option(
    "--address",
    default=None,
    help="With --cluster: Ray cluster to join (e.g. auto or HOST:6379); "
    "default: start a local one.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
def serve(**o: Any) -> None:
    """Serve an OpenAI-compatible API with Predicted Outputs (chat, completions, apply)."""
    require("uvicorn", "serve")
    # The server needs the `serve` extra (fastapi, uvicorn): imported only when serving.
    from edge_spec.server.app import create_app, make_server

    if not _is_loopback(o["host"]):
        if not o["api_key"]:
            click.echo(
                f"warning: listening on {o['host']} without an API key: anyone who can "
                "reach this port can use the model (set --api-key or EDGE_SPEC_API_KEY)",
                err=True,
            )
        if not o["allowed_hosts"]:
            click.echo(
                "note: only requests whose Host header is a loopback name or the "
                "--host address are answered; clients that reach this machine by another "
                "name or address need --allowed-host NAME (or '*')",
                err=True,
            )
    logger = logging.getLogger("edge_spec")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(o["log_level"].upper())

    failure: list[BaseException] = []
    server: Any = None

    def on_load_error(exc: BaseException) -> None:
        failure.append(exc)
        if server is not None:
            server.should_exit = True

    settings = ServerSettings(
        host=o["host"],
        port=o["port"],
        api_key=o["api_key"] or None,
        max_queue=o["max_queue"],
        max_body_bytes=o["max_body_bytes"],
        header_timeout_s=o["header_timeout_s"],
        body_timeout_s=o["body_timeout_s"],
        keep_alive_s=o["keep_alive_s"],
        max_connections=o["max_connections"],
        allowed_hosts=_split(o["allowed_hosts"]),
        allowed_origins=_split(o["allowed_origins"]),
    )
    if o["cluster"]:
        serve_cluster(o, settings)
        return
    app = create_app(engine_factory(o), settings, on_load_error)
    server = make_server(app, settings, o["log_level"])
    try:
        server.run()
    except SystemExit as exc:  # uvicorn exits like this when it cannot bind
        if exc.code not in (0, None) and not server.started:
            raise UserError(
                f"could not serve on {o['host']}:{o['port']} (see the message "
                "above); pick another --port or --host"
            ) from None
        raise
    if failure:
        exc = failure[0]
        raise UserError(
            str(exc)
            if isinstance(exc, UserError)
            else f"could not load the model: {type(exc).__name__}: {exc}"
        )

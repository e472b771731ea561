"""Serving the app with uvicorn: limits on slow clients and open connections.

uvicorn times out idle keep-alive connections but not a client that sends part of its headers
and stalls, and its ``limit_concurrency`` answers in plain text. `GuardedH11` adds both on its
h11 protocol: a header timeout (a request line and headers must arrive within
``header_timeout_s`` of the connection opening or of the previous response) and a cap on open
connections, each refusal an OpenAI-style JSON error. The body timeout lives in `read_json`,
where the app reads the body. uvicorn comes from the extra ``serve``.

Example: ``make_server(create_app(engine, settings), settings).run()``.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any

from edge_spec.errors import require

require("uvicorn", "serve")

import h11  # noqa: E402
import uvicorn  # noqa: E402
from uvicorn.protocols.http.h11_impl import H11Protocol  # noqa: E402

from edge_spec.config.settings import ServerSettings  # noqa: E402

_REASONS = {408: "Request Timeout", 503: "Service Unavailable"}


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a header timeout and a cap on open connections."""

    header_timeout_s: float = ServerSettings.header_timeout_s
    max_connections: int = ServerSettings.max_connections

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        # Over the cap: the first request this connection sends gets the 503 (a response
        # before any request would read as a broken connection to most clients).
        self._over_limit = len(self.connections) > self.max_connections
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._over_limit:
            self._refuse(
                503,
                "server_overloaded",
                "the server has too many open connections "
                f"(limit {self.max_connections}); retry shortly",
                retry=True,
            )
            return
        if self._header_timer is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the next request on a kept-alive connection begins
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._on_timeout)

    def _disarm(self) -> None:
        if getattr(self, "_header_timer", None) is not None:
            self._header_timer.cancel()  # type: ignore[union-attr]
            self._header_timer = None

    def _on_timeout(self) -> None:
        self._header_timer = None
        idle = self.cycle is None or self.cycle.response_complete
        if self.conn.their_state is h11.IDLE and idle:
            self._refuse(
                408,
                "request_timeout",
                f"the request line and headers did not arrive within {self.header_timeout_s:g} s",
            )

    def _refuse(self, status: int, code: str, message: str, retry: bool = False) -> None:
        """Answer `status` with an OpenAI-style body, outside h11 (no request was parsed), and
        close the connection."""
        if self.transport.is_closing():
            return
        kind = "server_error" if status >= 500 else "invalid_request_error"
        body = json.dumps(
            {"error": {"message": message, "type": kind, "param": None, "code": code}}
        ).encode()
        head = (
            f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n"
            + ("retry-after: 1\r\n" if retry else "")
            + "\r\n"
        )
        self.transport.write(head.encode("latin-1") + body)
        self.transport.close()


def protocol_for(settings: ServerSettings) -> type[GuardedH11]:
    """`GuardedH11` with the limits of `settings` (uvicorn takes a class, not an instance)."""
    return type(
        "EdgeSpecH11",
        (GuardedH11,),
        {
            "header_timeout_s": settings.header_timeout_s,
            "max_connections": settings.max_connections,
        },
    )


class DrainingServer(uvicorn.Server):
    """uvicorn's server, telling the app's runner when shutdown begins (SIGTERM, Ctrl-C), before
    uvicorn waits for open requests: the ones still queued are answered at once."""

    def __init__(self, config: Any, on_shutdown: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.on_shutdown = on_shutdown

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.on_shutdown is not None:
            self.on_shutdown()
        await super().shutdown(sockets)


def make_server(
    app: Any, settings: ServerSettings, log_level: str = "info", **config: Any
) -> uvicorn.Server:
    """A uvicorn server for `app` with the slow-client limits and shutdown grace of `settings`;
    an app from `create_app` has its runner drained when shutdown begins."""
    cfg = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        http=protocol_for(settings),
        ws="none",
        # uvicorn's hints say int; both go to asyncio, which takes seconds
        timeout_keep_alive=settings.keep_alive_s,  # type: ignore[arg-type]
        timeout_graceful_shutdown=settings.shutdown_grace_s,  # type: ignore[arg-type]
        **config,
    )
    runner = getattr(getattr(app, "state", None), "runner", None)
    grace = settings.shutdown_grace_s
    return DrainingServer(cfg, (lambda: runner.drain(grace)) if runner is not None else None)

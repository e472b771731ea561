"""Requests no web page may make on the user's behalf: a foreign Host, a foreign Origin.

A server on 127.0.0.1 is reachable from every page the user's browser opens. Two defences keep
such pages out: the Host check (a DNS-rebinding page reaches this port under its own domain
name, so its requests carry that name as Host), and the Origin check (a cross-site request says
which page sent it). Together with `read_json` insisting on ``application/json``, which a page
cannot send cross-site without a CORS preflight this server refuses, no page can start work or
read an answer unless its origin is allowed (`ServerSettings.allowed_origins`).

A request without Host or Origin (curl, an IDE extension, the cluster's in-process calls) is not
a browser's, so it passes; the API key, when set, still guards it.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Callable, Mapping

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from edge_spec.config.settings import ServerSettings
from edge_spec.server.errors import HTTPError

# Pages served from this machine: any port, http or https.
LOOPBACK_ORIGIN = (
    r"https?://(?:localhost|[a-z0-9.-]+\.localhost|127(?:\.\d{1,3}){3}|\[::1\])"
    r"(?::\d{1,5})?"
)


def host_name(value: str) -> str:
    """The name in a Host header, lowercase, without port or trailing dot (IPv6 keeps [])."""
    v = value.strip().lower()
    if v.startswith("["):
        end = v.find("]")
        return v[: end + 1] if end > 0 else v
    if v.count(":") == 1:
        v = v.partition(":")[0]
    return v.rstrip(".")


def is_loopback(name: str) -> bool:
    """localhost, a *.localhost name, or a loopback address (127.0.0.0/8, ::1)."""
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_unspecified(name: str) -> bool:
    try:
        return ipaddress.ip_address(name.strip("[]")).is_unspecified
    except ValueError:
        return False


def origin_regex(patterns: tuple[str, ...]) -> str:
    """One case-insensitive regex (for `re.fullmatch`) matching every allowed browser origin."""
    parts = [LOOPBACK_ORIGIN, *(fnmatch.translate(p.strip().rstrip("/")) for p in patterns)]
    return "(?i)(?:" + "|".join(parts) + ")"


class BrowserGuard:
    """The Host and Origin checks of one server's settings (patterns compiled once)."""

    def __init__(self, settings: ServerSettings) -> None:
        bound = host_name(settings.host)
        extra = [] if _is_unspecified(bound) else [bound]
        self.hosts = tuple(p.strip().lower() for p in (*settings.allowed_hosts, *extra))
        self.origins = re.compile(origin_regex(settings.allowed_origins))

    def host_ok(self, host: str | None) -> bool:
        if host is None:
            return True
        name = host_name(host)
        return is_loopback(name) or any(fnmatch.fnmatchcase(name, p) for p in self.hosts)

    def origin_ok(self, origin: str | None) -> bool:
        return origin is None or self.origins.fullmatch(origin.strip()) is not None

    def refusal(self, headers: Mapping[str, str]) -> HTTPError | None:
        """The 403 a request gets for its Host or Origin header, or None when both pass."""
        host, origin = headers.get("host"), headers.get("origin")
        if not self.host_ok(host):
            return HTTPError(
                403,
                f"Host {_show(host)} is not allowed: this server answers loopback names "
                "only; its operator can allow more with `serve --allowed-host NAME`",
                "permission_error",
                code="host_not_allowed",
            )
        if not self.origin_ok(origin):
            return HTTPError(
                403,
                f"Origin {_show(origin)} is not allowed to call this server; its operator "
                "can allow a page with `serve --allowed-origin ORIGIN`",
                "permission_error",
                code="origin_not_allowed",
            )
        return None


def _show(value: str | None) -> str:
    return repr((value or "")[:100])


class GuardMiddleware:
    """ASGI middleware answering `BrowserGuard.refusal` before any route (or CORS) runs."""

    def __init__(
        self, app: ASGIApp, guard: BrowserGuard, on_refused: Callable[[], None] | None = None
    ) -> None:
        self.app, self.guard, self.on_refused = app, guard, on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            err = self.guard.refusal(Headers(scope=scope))
            if err is not None:
                if self.on_refused is not None:
                    self.on_refused()
                await err.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)

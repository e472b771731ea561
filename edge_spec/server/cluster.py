"""edge-spec on Ray Serve: engine replicas across a Ray cluster, with prefix-affinity routing.

Two deployments (docs/cluster.md):

- `Ingress` (FastAPI via ``serve.ingress``, no CPU reserved): authorization, body parsing with
  the single server's wire models, the affinity key (`edge_spec.server.routing`), and the call
  to an engine replica through a deployment handle. The handle's router (`AffinityRouter`)
  picks the replica; Ray Serve's proxy is the only HTTP hop in front of it.
- `EngineReplica`: one Engine per replica, one request at a time. It runs the single server's
  own app (`create_app`) in process, called as ASGI, so a replica answers byte for byte what
  ``edge-spec serve`` answers: same JSON, errors, usage and SSE. Serve admits
  ``max_ongoing_requests + backlog`` per replica; the extra ones wait on the app's own FIFO,
  so the engine starts the next request the moment one ends instead of idling while Ray's
  router backs off and re-probes (benchmarks/results/cluster-load-amd-epyc-2core).

Faults: a replica that dies is restarted by Ray (its actor fails health checks or exits); a
request on it that has sent no byte of its answer yet (a JSON answer, or a stream before its
first chunk) is retried once on another replica; a second loss gets a 503 ``replica_failed``,
and a stream already under way an SSE error event and ``[DONE]``; never another request's
text, since every response travels on its own generator.
More than ``max_queued_requests`` waiting at the handle gets 503 + Retry-After, as the single
server does past ``max_queue``. ``/health`` reports ``degraded`` while fewer replicas run than
configured. ray[serve] comes from the extra ``cluster``.
"""

# No `from __future__ import annotations`: Serve pickles the ingress class by value, and
# FastAPI must resolve its `Request` annotations from the pickled globals.

import asyncio
import contextlib
import hmac
import json
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from edge_spec.errors import require

require("ray", "cluster")
require("fastapi", "serve")

import ray  # noqa: E402
from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import JSONResponse, Response, StreamingResponse  # noqa: E402
from ray import serve  # noqa: E402
from ray.exceptions import RayError  # noqa: E402
from ray.serve.config import RequestRouterConfig  # noqa: E402
from ray.serve.exceptions import BackPressureError  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402

from edge_spec.config.settings import ClusterSettings, ServerSettings  # noqa: E402
from edge_spec.engine import build_engine  # noqa: E402
from edge_spec.server.app import create_app  # noqa: E402
from edge_spec.server.body import read_json, validate_request  # noqa: E402
from edge_spec.server.errors import HTTPError, error_response  # noqa: E402
from edge_spec.server.guard import BrowserGuard  # noqa: E402
from edge_spec.server.routing import AffinityRouter, affinity_key  # noqa: E402
from edge_spec.server.wire import (  # noqa: E402
    ApplyRequest,
    ChatRequest,
    CompletionRequest,
    sse_error,
)

ENGINE_DEPLOYMENT = "EngineReplica"
REPLICA_BACKLOG = ClusterSettings().backlog  # held beyond the requests running (module doc)
REPLICA_HEADER = "x-edge-spec-replica"  # which replica answered (affinity is observable)
NODE_HEADER = "x-edge-spec-node"  # the Ray node it runs on (placement is observable)
_HOP_HEADERS = {"content-length", "transfer-encoding", "connection"}


async def asgi_call(
    app: Any, method: str, path: str, headers: list[tuple[str, str]], body: bytes
) -> AsyncIterator[dict[str, Any]]:
    """Run one HTTP request through an ASGI `app` in process; yields its send() messages.

    Closing the generator early is a client disconnect: the app's request sees
    ``http.disconnect``, which cancels its generation (as with a real socket).
    """
    sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    gone = asyncio.Event()
    body_read = False

    async def receive() -> dict[str, Any]:
        nonlocal body_read
        if not body_read:
            body_read = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 80),
    }
    task = asyncio.ensure_future(app(scope, receive, sent.put))
    try:
        while True:
            get = asyncio.ensure_future(sent.get())
            await asyncio.wait({get, task}, return_when=asyncio.FIRST_COMPLETED)
            if not get.done():
                get.cancel()
                task.result()  # the app ended without finishing the response: re-raise
                return
            msg = get.result()
            yield msg
            if msg["type"] == "http.response.body" and not msg.get("more_body", False):
                return
    finally:
        gone.set()
        if not task.done():
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(task, 5)


class EngineReplica:
    """One engine, served by the single server's app; `call` is what the ingress invokes."""

    def __init__(
        self,
        engine_options: dict[str, Any],
        server: ServerSettings,
        cluster: ClusterSettings,
        backlog: int = REPLICA_BACKLOG,
    ) -> None:
        opts = {"threads": cluster.threads, **engine_options}
        self.engine = build_engine(**opts)
        # Serve admits what the deployment allows; the inner queue only needs room for them.
        admitted = cluster.max_ongoing_requests + backlog
        inner = replace(server, api_key=None, max_queue=admitted + 1)
        self.app = create_app(self.engine, inner)
        self.runner = self.app.state.runner
        self.runner.start()  # the app's lifespan never runs: nothing serves it over a socket
        self.replica_id = serve.get_replica_context().replica_id.unique_id
        self.tags = [
            (REPLICA_HEADER.encode(), self.replica_id.encode()),
            (NODE_HEADER.encode(), ray.get_runtime_context().get_node_id().encode()),
        ]

    async def call(
        self, affinity: str, method: str, path: str, headers: list[tuple[str, str]], body: bytes
    ) -> AsyncIterator[dict[str, Any]]:
        """The response's ASGI messages; `affinity` is read by the router, not here."""
        del affinity
        async for msg in asgi_call(self.app, method, path, headers, body):
            if msg["type"] == "http.response.start":
                msg = {**msg, "headers": [*msg.get("headers", []), *self.tags]}
            yield msg

    def check_health(self) -> None:
        status, body = self.runner.health()
        if status != 200:
            raise RuntimeError(f"engine not ready: {body}")

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.runner.close()


ingress_app = FastAPI(title="edge-spec cluster", docs_url=None, redoc_url=None, openapi_url=None)


@ingress_app.exception_handler(HTTPError)
async def _on_http_error(_req: Request, exc: HTTPError) -> JSONResponse:
    return exc.response()


@ingress_app.exception_handler(StarletteHTTPException)
async def _on_starlette(_req: Request, exc: StarletteHTTPException) -> JSONResponse:
    kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    return error_response(exc.status_code, str(exc.detail), kind)


def _replica_failed(exc: BaseException) -> HTTPError:
    return HTTPError(
        503,
        f"the replica serving this request failed ({type(exc).__name__}); retry",
        "server_error",
        code="replica_failed",
        headers={"Retry-After": "1"},
    )


OVERLOADED = "the cluster is busy (every replica running and the queue full); retry shortly"


async def _relay(gen: Any, first: bytes) -> AsyncIterator[bytes]:
    """The SSE body from the replica (`first`: its first chunk, already read); a replica lost
    mid-stream ends it with an error event."""
    finished = False
    try:
        if first:
            yield first
        async for msg in gen:
            if msg.get("body"):
                yield msg["body"]
        finished = True
    except RayError as exc:
        finished = True
        yield sse_error(_replica_failed(exc)).encode("utf-8")
    finally:
        if not finished:  # the client went away: stop the replica's generation
            gen.cancel()


def replica_health(cluster: ClusterSettings) -> dict[str, Any]:
    """ok / degraded (fewer replicas running than wanted) / unavailable (none running)."""
    target = cluster.replicas if cluster.min_replicas is None else max(cluster.min_replicas, 1)
    try:
        app = serve.status().applications[cluster.app_name]
        dep = app.deployments[ENGINE_DEPLOYMENT]
    except (KeyError, RayError) as exc:
        return {"status": "unavailable", "error": f"no deployment status: {exc}"}
    states = {str(getattr(s, "value", s)): n for s, n in dep.replica_states.items()}
    running = states.get("RUNNING", 0)
    status = "unavailable" if running == 0 else ("ok" if running >= target else "degraded")
    return {
        "status": status,
        "replicas": {"running": running, "target": target, **states},
        "deployment": str(getattr(dep.status, "value", dep.status)),
        "message": dep.message,
    }


@serve.ingress(ingress_app)
class Ingress:
    """HTTP in front of the engine replicas: parsing, the affinity key, back-pressure, health."""

    def __init__(self, engine: Any, server: ServerSettings, cluster: ClusterSettings) -> None:
        self.engine = engine.options(stream=True)
        self.server, self.cluster = server, cluster
        self.key = (server.api_key or "").encode("utf-8")
        self.guard = BrowserGuard(server)

    def _authorize(self, request: Request) -> None:
        if not self.key:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.key):
            raise HTTPError(
                401,
                "missing or incorrect API key",
                code="invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )

    async def _forward(self, request: Request, model: type | None) -> Response:
        refused = self.guard.refusal(request.headers)
        if refused is not None:
            raise refused
        self._authorize(request)
        key, body = "", b""
        if model is not None:
            raw = await read_json(
                request,
                self.server.max_body_bytes,
                self.server.max_json_depth,
                self.server.body_timeout_s,
            )
            key = affinity_key(validate_request(model, raw), self.cluster.affinity_min_chars) or ""
            body = json.dumps(raw, ensure_ascii=False).encode("utf-8")
        args = (key, request.method, request.url.path, [("content-type", "application/json")], body)
        for attempt in range(2):
            try:
                return await self._answer(*args)
            except (RayError, StopAsyncIteration) as exc:
                # Lost before a byte of the answer went out: once more, on another replica
                # (the router drops a dead one). Requests have no side effects, and greedy or
                # seeded ones give the text the lost replica would have.
                if attempt:
                    raise _replica_failed(exc) from None
        raise AssertionError("unreachable")

    async def _answer(self, *args: Any) -> Response:
        """One replica's answer: whole for JSON; for SSE, once its first chunk has come."""
        gen = self.engine.call.remote(*args)
        try:
            start = await gen.__anext__()
        except BackPressureError:
            raise HTTPError(
                503,
                OVERLOADED,
                "server_error",
                code="server_overloaded",
                headers={"Retry-After": "1"},
            ) from None
        out_headers = {
            k.decode("latin-1"): v.decode("latin-1")
            for k, v in start["headers"]
            if k.decode("latin-1").lower() not in _HOP_HEADERS
        }
        status = start["status"]
        if "text/event-stream" not in out_headers.get("content-type", ""):
            content = b"".join([m.get("body", b"") async for m in gen])
            return Response(content, status_code=status, headers=out_headers)
        first = await gen.__anext__()
        return StreamingResponse(
            _relay(gen, first.get("body", b"")), status_code=status, headers=out_headers
        )

    @ingress_app.post("/v1/chat/completions")
    async def chat_completions(self, request: Request) -> Response:
        return await self._forward(request, ChatRequest)

    @ingress_app.post("/v1/completions")
    async def completions(self, request: Request) -> Response:
        return await self._forward(request, CompletionRequest)

    @ingress_app.post("/v1/apply")
    async def apply(self, request: Request) -> Response:
        return await self._forward(request, ApplyRequest)

    @ingress_app.get("/v1/models")
    async def models(self, request: Request) -> Response:
        return await self._forward(request, None)

    @ingress_app.get("/health")
    async def health(self) -> JSONResponse:
        body = await asyncio.to_thread(replica_health, self.cluster)
        status = 503 if body["status"] == "unavailable" else 200
        return JSONResponse(
            body, status_code=status, headers={"Retry-After": "1"} if status == 503 else None
        )


def build_app(
    engine_options: dict[str, Any],
    cluster: ClusterSettings,
    server: ServerSettings,
    backlog: int | None = None,
    resources: dict[str, float] | None = None,
    max_per_node: int | None = None,
) -> Any:
    """The Serve application: Ingress bound to the engine deployment.

    `backlog`, `resources` and `max_per_node` override the `cluster` settings of the same
    meaning (`backlog`, `resources`, `max_replicas_per_node`).
    """
    backlog = cluster.backlog if backlog is None else backlog
    resources = dict(cluster.resources) if resources is None else resources
    max_per_node = cluster.max_replicas_per_node if max_per_node is None else max_per_node
    if cluster.min_replicas is not None or cluster.max_replicas is not None:
        lo = cluster.min_replicas if cluster.min_replicas is not None else 1
        hi = cluster.max_replicas if cluster.max_replicas is not None else max(lo, cluster.replicas)
        scale: dict[str, Any] = {
            "autoscaling_config": {
                "min_replicas": lo,
                "max_replicas": hi,
                "target_ongoing_requests": cluster.max_ongoing_requests,
            }
        }
    else:
        scale = {"num_replicas": cluster.replicas}
    router = RequestRouterConfig(
        request_router_class=AffinityRouter, request_router_kwargs={"mode": cluster.affinity}
    )
    engine = serve.deployment(EngineReplica).options(
        name=ENGINE_DEPLOYMENT,
        max_ongoing_requests=cluster.max_ongoing_requests + backlog,
        max_queued_requests=cluster.max_queued_requests,
        request_router_config=router,
        ray_actor_options={
            "num_cpus": cluster.num_cpus,
            "num_gpus": cluster.num_gpus,
            "resources": dict(resources or {}),
        },
        max_replicas_per_node=max_per_node,
        health_check_period_s=2,
        health_check_timeout_s=30,
        **scale,
    )
    ingress = serve.deployment(Ingress).options(
        name="Ingress", ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1024
    )
    return ingress.bind(engine.bind(engine_options, server, cluster, backlog), server, cluster)


def app_builder(args: dict[str, Any]) -> Any:
    """For ``serve run``/``serve deploy`` configs: args are `engine` (build_engine options),
    `cluster` (ClusterSettings fields) and `server` (ServerSettings fields)."""
    return build_app(
        dict(args.get("engine", {})),
        ClusterSettings(**args.get("cluster", {})),
        ServerSettings(**args.get("server", {})),
    )


def start(
    engine_options: dict[str, Any],
    cluster: ClusterSettings,
    server: ServerSettings,
    blocking: bool = True,
) -> Any:
    """Start or join a Ray cluster, start Serve's HTTP proxy on host:port, deploy the app."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not ray.is_initialized():
        # A local instance for one machine: no dashboard (it binds ports and costs memory).
        local = {"include_dashboard": False} if cluster.address is None else {}
        ray.init(address=cluster.address, log_to_driver=False, **local)
    serve.start(http_options={"host": server.host, "port": server.port})
    return serve.run(
        build_app(engine_options, cluster, server),
        name=cluster.app_name,
        route_prefix="/",
        blocking=blocking,
    )


__all__ = [
    "ENGINE_DEPLOYMENT",
    "NODE_HEADER",
    "REPLICA_BACKLOG",
    "REPLICA_HEADER",
    "EngineReplica",
    "Ingress",
    "app_builder",
    "asgi_call",
    "build_app",
    "replica_health",
    "start",
]

"""An OpenAI-compatible HTTP server with Predicted Outputs, for IDE apply backends.

Endpoints: ``POST /v1/chat/completions``, ``POST /v1/completions``, ``POST /v1/apply``,
``GET /v1/models`` and ``GET /health`` (503 while the model loads). Build the app with
`create_app(engine_or_factory, ServerSettings(...))` and serve it with any ASGI server;
``edge-spec serve`` does that with uvicorn.

How it runs:

- One engine, one request at a time. Every generation runs on a single worker thread
  (a one-thread executor, FIFO); the event loop never touches the engine. A request is admitted
  only while fewer than ``max_queue`` requests are running or waiting; past that it gets a 503
  with ``Retry-After: 1`` at once, before anything is queued.
- Cancellation: each request carries a `threading.Event` passed to the engine as ``cancel``; the
  speculative loop checks it before every verify step. It is set when the client disconnects
  (polled with ``request.is_disconnected()`` while waiting, streaming or not), when the SSE
  generator or the response is closed, and at shutdown. A request cancelled while still waiting
  in the queue never reaches the engine.
- Prediction (``prediction: {"type": "content", ...}``) and any fenced code blocks in the
  messages become references for the reference drafter; the output stays exactly what the target
  alone would produce. See `prediction_usage` for how the token accounting is defined.

The wire format lives in `edge_spec.server.wire`, the worker in `edge_spec.server.runner`, the
routes in `edge_spec.server.routes`, the Host/Origin checks in `edge_spec.server.guard`;
fastapi, pydantic and uvicorn come from the extra ``serve``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from edge_spec.errors import require

require("fastapi", "serve")

from fastapi import FastAPI, Request  # noqa: E402
from fastapi.middleware.cors import CORSMiddleware  # noqa: E402
from fastapi.responses import JSONResponse  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402

from edge_spec.engine import Engine  # noqa: E402
from edge_spec.server.errors import HTTPError, error_response  # noqa: E402
from edge_spec.server.guard import BrowserGuard, GuardMiddleware, origin_regex  # noqa: E402
from edge_spec.server.routes import apply_routes, meta_routes, openai_routes  # noqa: E402
from edge_spec.server.runner import Runner  # noqa: E402
from edge_spec.server.service import Service  # noqa: E402
from edge_spec.server.serving import make_server  # noqa: E402
from edge_spec.server.wire import (  # noqa: E402
    DEFAULT_MAX_BODY,
    ServerSettings,
    code_blocks,
    prediction_usage,
)

__all__ = [
    "DEFAULT_MAX_BODY",
    "ServerSettings",
    "code_blocks",
    "create_app",
    "error_response",
    "make_server",
    "prediction_usage",
]


def create_app(
    engine: Engine | Callable[[], Engine],
    settings: ServerSettings | None = None,
    on_load_error: Callable[[BaseException], None] | None = None,
) -> FastAPI:
    """The ASGI app serving `engine` (an Engine, or a callable that builds one at startup).

    A factory runs in a background thread when the app starts, so ``/health`` answers (503)
    while the model loads.
    """
    settings = settings or ServerSettings()
    if settings.max_queue < 1:
        raise ValueError("max_queue must be at least 1")
    runner = Runner(engine, settings, on_load_error)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        runner.start()
        try:
            yield
        finally:
            runner.close()

    app = FastAPI(
        title="edge-spec", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.runner = runner
    # CORS answers preflights only for allowed origins; the guard, outermost, refuses the rest.
    app.add_middleware(
        CORSMiddleware,
        allow_origin_regex=origin_regex(settings.allowed_origins),
        allow_methods=["GET", "POST"],
        allow_headers=["authorization", "content-type"],
    )
    app.add_middleware(
        GuardMiddleware,
        guard=BrowserGuard(settings),
        on_refused=lambda: runner.count("bad_requests"),
    )
    app.add_exception_handler(HTTPError, _on_http_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _on_starlette)  # type: ignore[arg-type]
    svc = Service(runner, settings)
    for router in (meta_routes(svc), openai_routes(svc), apply_routes(svc)):
        app.include_router(router)
    return app


async def _on_http_error(req: Request, exc: HTTPError) -> JSONResponse:
    if 400 <= exc.status < 500 and not exc.counted:
        req.app.state.runner.count("bad_requests")
    return exc.response()


async def _on_starlette(req: Request, exc: StarletteHTTPException) -> JSONResponse:
    req.app.state.runner.count("bad_requests")
    kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    return error_response(
        exc.status_code, str(exc.detail), kind, headers=getattr(exc, "headers", None)
    )

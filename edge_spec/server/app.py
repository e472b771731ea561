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

The wire format lives in `edge_spec.server.wire`, the worker in `edge_spec.server.runner`;
fastapi, pydantic and uvicorn come from the extra ``serve``.
"""

from __future__ import annotations

import contextlib
import hmac
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from edge_spec.errors import require

require("fastapi", "serve")

from fastapi import FastAPI, Request  # noqa: E402
from fastapi.middleware.cors import CORSMiddleware  # noqa: E402
from fastapi.responses import JSONResponse, Response  # noqa: E402
from pydantic import BaseModel  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402

from edge_spec.config.settings import SamplingSettings  # noqa: E402
from edge_spec.server.guard import BrowserGuard, GuardMiddleware, origin_regex  # noqa: E402
from edge_spec.server.runner import Exchange, Runner, SSEResponse  # noqa: E402
from edge_spec.server.wire import (  # noqa: E402
    DEFAULT_MAX_BODY,
    FINISH,
    ApplyRequest,
    ChatApply,
    ChatRequest,
    CompletionRequest,
    GenRequest,
    HTTPError,
    Outcome,
    ServerSettings,
    chat_apply,
    code_blocks,
    error_of,
    error_response,
    prediction_account,
    prediction_usage,
    read_json,
    references,
    sampling_of,
    sse,
    sse_error,
    stops_of,
    text_of,
    usage_of,
    validate_request,
)

__all__ = ["DEFAULT_MAX_BODY", "ServerSettings", "code_blocks", "create_app", "error_response",
           "prediction_usage"]


def create_app(engine: Any, settings: ServerSettings | None = None,
               on_load_error: Callable[[BaseException], None] | None = None) -> FastAPI:
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

    app = FastAPI(title="edge-spec", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.runner = runner
    # CORS answers preflights only for allowed origins; the guard, outermost, refuses the rest.
    app.add_middleware(CORSMiddleware, allow_origin_regex=origin_regex(settings.allowed_origins),
                       allow_methods=["GET", "POST"], allow_headers=["authorization",
                                                                     "content-type"])
    app.add_middleware(GuardMiddleware, guard=BrowserGuard(settings))
    key = (settings.api_key or "").encode("utf-8")

    @app.exception_handler(HTTPError)
    async def _on_http_error(_req: Request, exc: HTTPError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(StarletteHTTPException)
    async def _on_starlette(_req: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return error_response(exc.status_code, str(exc.detail), kind,
                              headers=getattr(exc, "headers", None))

    def authorize(request: Request) -> None:
        if not key:
            return
        auth = request.headers.get("authorization", "")
        scheme, _, given = auth.partition(" ")
        ok = scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode("utf-8"),
                                                                key)
        if not ok:
            msg = ("missing API key: send 'Authorization: Bearer KEY'" if not auth
                   else "incorrect API key")
            raise HTTPError(401, msg, code="invalid_api_key",
                             headers={"WWW-Authenticate": "Bearer"})

    async def parse(request: Request, model: type[BaseModel]) -> Any:
        authorize(request)
        raw = await read_json(request, settings.max_body_bytes, settings.max_json_depth)
        req = validate_request(model, raw)
        runner.ready()
        return req

    def base(kind: str, prefix: str) -> dict[str, Any]:
        return {"id": f"{prefix}-{uuid.uuid4().hex[:24]}", "object": kind,
                "created": int(time.time()), "model": runner.model_id}

    async def start(request: Request, job: Callable[[Any, Exchange], Outcome],
                    stream: bool) -> tuple[Exchange, tuple[str, Any] | None]:
        """Admit, queue, and wait for the first event (an error before output is an HTTP error)."""
        runner.admit()
        ex = Exchange(request)
        runner.submit(lambda eng: job(eng, ex), ex.cancel, ex.push)
        try:
            first = await ex.next()
            while not stream and first is not None and first[0] == "delta":
                first = await ex.next()
        except BaseException:
            ex.close()
            raise
        if first is not None and first[0] == "error":
            ex.close()
            raise error_of(first[1])
        if first is None:
            ex.close()
        return ex, first

    def gen_job(prompt: Any, chat: bool, req: GenRequest, texts: Sequence[str],
                stream: bool) -> Callable[[Any, Exchange], Outcome]:
        prediction = text_of(req.prediction.content) if req.prediction else ""
        stops = stops_of(req.stop)
        sampling = sampling_of(req)
        max_tokens = req.max_completion_tokens or req.max_tokens

        def job(eng: Any, ex: Exchange) -> Outcome:
            refs = references(prediction, texts, eng.config.reference.max_reference_chars)
            res = eng.generate(prompt, max_tokens=max_tokens or eng.target.n_ctx, stop=stops,
                               sampling=sampling, references=refs, chat=chat,
                               on_delta=ex.on_delta if stream else None, cancel=ex.cancel)
            account = prediction_account(eng.target, prediction, res.text) if prediction \
                else None
            return Outcome(res.text, res.stats, res.stats.finish_reason, account=account)

        return job

    def chat_apply_job(req: ChatRequest, ap: ChatApply) -> Callable[[Any, Exchange], Outcome]:
        """A chat that carries an apply runs the apply pipeline; the answer is the merged file."""
        prediction = text_of(req.prediction.content) if req.prediction else ""
        sampling = sampling_of(req) if req.temperature else SamplingSettings(seed=req.seed)
        max_tokens = req.max_completion_tokens or req.max_tokens

        def job(eng: Any, ex: Exchange) -> Outcome:
            res = eng.apply(ap.original, ap.update, ap.instruction or None, lang=ap.lang,
                            max_tokens=max_tokens, sampling=sampling, engine=req.engine,
                            on_delta=ex.on_delta if req.stream else None, cancel=ex.cancel)
            account = (prediction_account(eng.target, prediction, res.text)
                       if prediction and res.engine != "merge" else None)
            return Outcome(res.text, res.stats, res.stats.finish_reason, account=account,
                           lazy_lines=res.lazy_lines, apply=res.to_dict())

        return job

    async def generation(request: Request, req: GenRequest, prompt: Any, chat: bool,
                         texts: Sequence[str],
                         job: Callable[[Any, Exchange], Outcome] | None = None) -> Response:
        kind = "chat.completion" if chat else "text_completion"
        prefix = "chatcmpl" if chat else "cmpl"
        job = job or gen_job(prompt, chat, req, texts, req.stream)
        ex, first = await start(request, job, req.stream)
        if first is None:
            return Response(status_code=499)
        head = base(kind, prefix)
        if not req.stream:
            out: Outcome = await first[1].settle()
            choice: dict[str, Any] = {"index": 0, "finish_reason": FINISH[out.finish_reason]}
            if chat:
                choice["message"] = {"role": "assistant", "content": out.text, "refusal": None}
            else:
                choice.update(text=out.text, logprobs=None)
            choice["logprobs"] = None
            extra = {"edge_spec_apply": out.apply} if out.apply else {}
            return JSONResponse({**head, "choices": [choice], **extra,
                                 "usage": usage_of(out.stats, out.accepted, out.rejected,
                                                 out.queue_ms)})
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        head["object"] = "chat.completion.chunk" if chat else "text_completion"

        def chunk(delta: str | None, finish: str | None, role: bool = False) -> str:
            if chat:
                d: dict[str, Any] = {"role": "assistant", "content": ""} if role else (
                    {} if delta is None else {"content": delta})
                c = {"index": 0, "delta": d, "logprobs": None, "finish_reason": finish}
            else:
                c = {"index": 0, "text": delta or "", "logprobs": None, "finish_reason": finish}
            obj = {**head, "choices": [c]}
            if include_usage:
                obj["usage"] = None
            return sse(obj)

        async def events() -> AsyncIterator[str]:
            item = first
            try:
                if chat:
                    yield chunk(None, None, role=True)
                while item is not None:
                    kind_, val = item
                    if kind_ == "delta":
                        yield chunk(val + ex.more_text(), None)
                    elif kind_ == "done":
                        yield chunk(None, FINISH[val.finish_reason])
                        if include_usage:
                            await val.settle()
                            yield sse({**head, "choices": [],
                                        "usage": usage_of(val.stats, val.accepted, val.rejected,
                                                        val.queue_ms)})
                        yield "data: [DONE]\n\n"
                        return
                    else:
                        yield sse_error(val)
                        return
                    if await request.is_disconnected():
                        return
                    item = await ex.next()
            finally:
                ex.close()

        return SSEResponse(events(), ex)

    @app.get("/health")
    async def health() -> JSONResponse:
        status, body = runner.health()
        return JSONResponse(body, status_code=status,
                            headers={"Retry-After": "1"} if status == 503 else None)

    @app.get("/v1/models")
    async def models(request: Request) -> JSONResponse:
        authorize(request)
        runner.ready()
        return JSONResponse({"object": "list", "data": [
            {"id": runner.model_id, "object": "model", "created": int(time.time()),
             "owned_by": "edge-spec"}]})

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        req: ChatRequest = await parse(request, ChatRequest)
        if req.logprobs:
            raise HTTPError(400, "logprobs are not supported", param="logprobs")
        messages = [{"role": "system" if m.role == "developer" else m.role,
                     "content": text_of(m.content)} for m in req.messages]
        ap = chat_apply(req, messages)
        job = chat_apply_job(req, ap) if ap is not None else None
        return await generation(request, req, messages, True, [m["content"] for m in messages],
                                job)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        req: CompletionRequest = await parse(request, CompletionRequest)
        if req.echo or req.logprobs:
            raise HTTPError(400, "echo and logprobs are not supported",
                             param="echo" if req.echo else "logprobs")
        prompt = req.prompt
        if isinstance(prompt, list):
            if len(prompt) != 1:
                raise HTTPError(400, "exactly one prompt per request is supported",
                                 param="prompt")
            prompt = prompt[0]
        if not prompt:
            raise HTTPError(400, "prompt must not be empty", param="prompt")
        return await generation(request, req, prompt, False, [prompt])

    @app.post("/v1/apply")
    async def apply(request: Request) -> Response:
        req: ApplyRequest = await parse(request, ApplyRequest)
        sampling = SamplingSettings(req.temperature or 0.0, 0, 1.0, req.seed)  # greedy default

        def job(eng: Any, ex: Exchange) -> Outcome:
            res = eng.apply(req.original, req.update, req.instruction, template=req.template,
                            lang=req.lang, max_tokens=req.max_tokens, sampling=sampling,
                            on_delta=ex.on_delta if req.stream else None, cancel=ex.cancel,
                            engine=req.engine, path=req.path, guard=req.guard)
            return Outcome(res.text, res.stats, res.stats.finish_reason,
                           lazy_lines=res.lazy_lines, apply=res.to_dict())

        ex, first = await start(request, job, req.stream)
        if first is None:
            return Response(status_code=499)
        head = base("apply", "apply")

        def result(out: Outcome) -> dict[str, Any]:
            # lazy_lines: lines of `merged` where the model left a '... existing code ...'
            # marker instead of the code (the client decides: retry, naive merge, or show it).
            # engine: "merge" when the structural merge answered alone (no model ran);
            # verdicts per hunk; suspect: what the check found wrong with a model's file.
            return {**head, "merged": out.text, "finish_reason": FINISH[out.finish_reason],
                    "lazy_lines": out.lazy_lines, **out.apply,
                    "usage": usage_of(out.stats, queue_ms=out.queue_ms, details=False)}

        if not req.stream:
            return JSONResponse(result(first[1]))

        async def events() -> AsyncIterator[str]:
            item = first
            try:
                while item is not None:
                    kind_, val = item
                    if kind_ == "delta":
                        yield sse({**head, "object": "apply.chunk",
                                    "delta": val + ex.more_text()})
                    elif kind_ == "done":
                        yield sse(result(val))
                        yield "data: [DONE]\n\n"
                        return
                    else:
                        yield sse_error(val)
                        return
                    if await request.is_disconnected():
                        return
                    item = await ex.next()
            finally:
                ex.close()

        return SSEResponse(events(), ex)

    return app


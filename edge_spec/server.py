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

fastapi, pydantic and uvicorn are imported only by this module (extra ``serve``).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import hmac
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from edge_spec.errors import UserError, require

require("fastapi", "serve")
require("pydantic", "serve")

from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import JSONResponse, Response, StreamingResponse  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field, ValidationError  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402

log = logging.getLogger("edge_spec.server")

DEFAULT_MAX_BODY = 4 * 1024 * 1024
_POLL_S = 0.25  # how often a waiting request checks whether its client is still there
_FINISH = {"eos": "stop", "stop": "stop", "length": "length", "cancelled": "stop"}


@dataclass
class ServerSettings:
    """Server options; `edge-spec serve` fills them from its command line."""

    api_key: str | None = None
    max_queue: int = 8  # running + waiting requests; more get 503
    max_body_bytes: int = DEFAULT_MAX_BODY
    model_id: str | None = None  # the name reported; default: the engine's model name
    on_load_error: Callable[[BaseException], None] | None = None


# ---------------------------------------------------------------------------------------------
# Request models (pydantic v2). Unknown fields are ignored, as OpenAI clients send many.


class _Base(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TextPart(_Base):
    type: Literal["text"]
    text: str


class ChatMessage(_Base):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None


class Prediction(_Base):
    type: Literal["content"]
    content: str | list[TextPart]


class StreamOptions(_Base):
    include_usage: bool = False


class _GenRequest(_Base):
    model: str | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    prediction: Prediction | None = None
    n: int | None = Field(None, ge=1, le=1)


class ChatRequest(_GenRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    logprobs: bool | None = None


class CompletionRequest(_GenRequest):
    prompt: str | list[str]
    echo: bool = False
    logprobs: int | None = None


class ApplyRequest(_Base):
    original: str
    update: str
    instruction: str | None = None
    stream: bool = False
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    seed: int | None = None
    template: str | None = None
    lang: str = ""


# ---------------------------------------------------------------------------------------------
# Helpers shared by the endpoints.


class _HTTPError(Exception):
    """An OpenAI-style error response, raised from request handling."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = (
            status, message, type_, param, code)
        self.headers = headers

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, self.type, self.param, self.code,
                              self.headers)


class _Cancelled(Exception):
    """The request was cancelled (client gone, shutdown) before it finished."""


def error_response(status: int, message: str, type_: str = "invalid_request_error",
                   param: str | None = None, code: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    """`{"error": {"message", "type", "param", "code"}}`, as OpenAI's API answers errors."""
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def _text(content: str | list[TextPart] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content)


_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")


def code_blocks(text: str) -> list[str]:
    """The contents of the fenced code blocks (``` or ~~~) in a Markdown text.

    >>> code_blocks("x\\n```py\\na = 1\\n```\\nand ~~~\\n~~~~\\nb\\n~~~~")
    ['a = 1\\n', 'b\\n']
    """
    blocks: list[str] = []
    fence: str | None = None
    body: list[str] = []
    for line in text.splitlines(keepends=True):
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence, body = m.group(1), []
            continue
        if (m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)
                and not line[m.end():].strip()):
            blocks.append("".join(body))
            fence = None
        else:
            body.append(line)
    if fence is not None and body:  # an unclosed fence runs to the end
        blocks.append("".join(body))
    return [b for b in blocks if b.strip()]


def prediction_usage(target: Any, prediction: str, output: str) -> tuple[int, int]:
    """`(accepted_prediction_tokens, rejected_prediction_tokens)` as OpenAI defines them.

    accepted = the prediction's tokens that ended up in the output; rejected = the prediction's
    other tokens, so ``accepted + rejected == len(prediction tokens)``. Both texts are tokenized
    the same way with the target's tokenizer (``special=False``): the output's *text* rather than
    its generated token ids, so that identical text always counts as fully accepted even where
    the model emitted a non-canonical tokenization or a stop string cut the last token. "Ended up
    in the output" is the longest common subsequence of the two token lists, approximated by the
    total size of `difflib.SequenceMatcher`'s matching blocks (``autojunk=False``).

    These counts are bookkeeping only: drafting speed does not depend on them, and the output is
    what the target alone would produce whatever the prediction says.
    """
    pred = target.tokenize(prediction, special=False) if prediction else []
    if not pred:
        return 0, 0
    out = target.tokenize(output, special=False) if output else []
    sm = difflib.SequenceMatcher(None, pred, out, autojunk=False)
    accepted = sum(b.size for b in sm.get_matching_blocks())
    return accepted, len(pred) - accepted


def _references(prediction: str, texts: Sequence[str], cap: int) -> list[str]:
    """The prediction first, then the fenced code blocks of the messages (and, for an apply-style
    chat with two or more blocks, the naive merge of the last into the first), within `cap`."""
    refs = [prediction] if prediction else []
    blocks = [b for t in texts for b in code_blocks(t)]
    extra: list[str] = []
    if len(blocks) >= 2:
        from edge_spec.apply import MARKER, naive_merge

        if any(MARKER.match(line) for line in blocks[-1].splitlines()):
            with contextlib.suppress(Exception):  # a drafting hint only
                extra.append(naive_merge(blocks[0], blocks[-1]))
    total = sum(len(r) for r in refs)
    for b in [*extra, *blocks]:
        if b not in refs and total + len(b) <= cap:
            refs.append(b)
            total += len(b)
    return refs


def _sampling(req: Any) -> Any:
    from edge_spec.verify import SamplingConfig

    temp = 1.0 if req.temperature is None else req.temperature  # OpenAI's default
    return SamplingConfig(temp, getattr(req, "top_k", None) or 0,
                          1.0 if getattr(req, "top_p", None) is None else req.top_p, req.seed)


def _stops(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if len(stops) > 16:
        raise _HTTPError(400, "at most 16 stop strings are supported", param="stop")
    return tuple(s for s in stops if s)


def _usage(stats: Any, accepted: int = 0, rejected: int = 0, queue_ms: float = 0.0,
           details: bool = True) -> dict[str, Any]:
    d = stats.to_dict()
    usage: dict[str, Any] = {
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.output_tokens,
        "total_tokens": stats.prompt_tokens + stats.output_tokens,
        "prompt_tokens_details": {"cached_tokens": stats.cached_tokens},
    }
    if details:
        usage["completion_tokens_details"] = {
            "reasoning_tokens": 0,
            "accepted_prediction_tokens": accepted,
            "rejected_prediction_tokens": rejected,
        }
    usage["timings"] = {
        "queue_ms": round(queue_ms, 2),
        "prefill_ms": d["prefill_ms"],
        "ttft_ms": d["ttft_ms"],
        "decode_ms": d["decode_ms"],
        "decode_tok_s": d["decode_tok_s"],
        "drafted": d["drafted"],
        "accepted": d["accepted"],
        "acceptance": d["acceptance"],
        "target_forwards": d["target_forwards"],
        "tokens_per_forward": d["tokens_per_forward"],
        "draft": d["draft"],
    }
    return usage


@dataclass
class _Outcome:
    text: str
    stats: Any
    finish_reason: str
    accepted: int = 0
    rejected: int = 0
    queue_ms: float = 0.0


# ---------------------------------------------------------------------------------------------
# The engine runner: loading, admission, the single worker thread.


def _is_engine(obj: object) -> bool:
    return hasattr(obj, "generate") and hasattr(obj, "target")


class _Runner:
    """Owns the engine, the admission count and the one worker thread that uses the engine."""

    def __init__(self, source: Any, settings: ServerSettings) -> None:
        self.settings = settings
        self._source = source
        self.engine = source if _is_engine(source) else None
        if self.engine is None and not callable(source):
            raise TypeError("create_app needs an Engine or a callable that returns one")
        self.load_error: str | None = None
        self.load_s = 0.0
        self._lock = threading.Lock()
        self.admitted = 0  # running + waiting
        self.running = 0
        self.counts = {"served": 0, "cancelled": 0, "rejected": 0, "failed": 0}
        self._cancels: set[threading.Event] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    def start(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="edge-spec-engine")
        if self.engine is None:
            threading.Thread(target=self._load, name="edge-spec-load", daemon=True).start()

    def _load(self) -> None:
        t0 = time.perf_counter()
        try:
            engine = self._source()
            if not _is_engine(engine):
                raise TypeError(f"the engine factory returned {type(engine).__name__}")
        except BaseException as exc:
            self.load_error = str(exc) or type(exc).__name__
            if self.settings.on_load_error is not None:
                self.settings.on_load_error(exc)  # the CLI reports it and stops the server
            else:
                log.error("could not load the model: %s", self.load_error)
            return
        self.load_s = time.perf_counter() - t0
        self.engine = engine
        log.info("model %s loaded in %.1f s", engine.model_name, self.load_s)

    @property
    def model_id(self) -> str | None:
        if self.settings.model_id:
            return self.settings.model_id
        return self.engine.model_name if self.engine is not None else None

    def ready(self) -> None:
        """Raise the 503 a request gets while the model is loading (or failed to load)."""
        if self.engine is not None:
            return
        if self.load_error is not None:
            raise _HTTPError(503, f"the model failed to load: {self.load_error}", "server_error",
                             code="model_load_failed")
        raise _HTTPError(503, "the model is loading; retry shortly", "server_error",
                         code="model_loading", headers={"Retry-After": "1"})

    def admit(self) -> None:
        """Take a slot (running + waiting < max_queue) or raise a 503 with Retry-After."""
        with self._lock:
            if self._closed or self.admitted >= self.settings.max_queue:
                self.counts["rejected"] += 1
                raise _HTTPError(
                    503, f"the server is busy ({self.admitted} requests running or queued, "
                    f"limit {self.settings.max_queue}); retry shortly", "server_error",
                    code="server_overloaded", headers={"Retry-After": "1"})
            self.admitted += 1

    def submit(self, job: Callable[[Any], _Outcome], cancel: threading.Event,
               push: Callable[[str, Any], None]) -> None:
        """Queue `job(engine)` on the worker thread; its outcome or error goes to `push`.

        The caller must hold a slot from `admit`; it is released when the job ends or is dropped.
        """
        t_submit = time.perf_counter()
        released = threading.Event()

        def release(ran: bool) -> None:
            if released.is_set():
                return
            released.set()
            with self._lock:
                self.admitted -= 1
                self.running -= ran
                self._cancels.discard(cancel)

        def work() -> None:
            with self._lock:
                self.running += 1
            queue_ms = (time.perf_counter() - t_submit) * 1e3
            try:
                if cancel.is_set():
                    raise _Cancelled()
                out = job(self.engine)
                out.queue_ms = queue_ms
                key = "cancelled" if out.finish_reason == "cancelled" else "served"
                with self._lock:
                    self.counts[key] += 1
                release(True)
                push("done", out)
            except BaseException as exc:
                with self._lock:
                    self.counts["cancelled" if isinstance(exc, _Cancelled) else "failed"] += 1
                release(True)
                push("error", exc)

        def dropped(fut: Any) -> None:
            if fut.cancelled():
                release(False)
                push("error", _Cancelled())

        with self._lock:
            self._cancels.add(cancel)
        try:
            assert self._executor is not None, "the app's lifespan has not started"
            fut = self._executor.submit(work)
        except RuntimeError:  # shutting down
            release(False)
            push("error", _Cancelled())
            return
        fut.add_done_callback(dropped)

    def health(self) -> tuple[int, dict[str, Any]]:
        with self._lock:
            load = {"in_flight": self.admitted, "running": self.running,
                    "waiting": self.admitted - self.running, "max_queue": self.settings.max_queue,
                    **self.counts}
        if self.engine is not None:
            return 200, {"status": "ok", "model": self.model_id,
                         "load_s": round(self.load_s, 2), **load}
        if self.load_error is not None:
            return 503, {"status": "error", "error": self.load_error}
        return 503, {"status": "loading"}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for ev in self._cancels:
                ev.set()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


class _Exchange:
    """One request's side of the worker: its cancel event and the queue of worker events."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.loop = asyncio.get_running_loop()
        self.q: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.cancel = threading.Event()
        self._getter: asyncio.Future | None = None
        self._peek: tuple[str, Any] | None = None

    def push(self, kind: str, value: Any) -> None:
        """Called from the worker thread."""
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is listening
            self.loop.call_soon_threadsafe(self.q.put_nowait, (kind, value))

    def on_delta(self, delta: str) -> None:
        self.push("delta", delta)

    async def next(self) -> tuple[str, Any] | None:
        """The next worker event, or None once the client has disconnected (cancels the job)."""
        if self._peek is not None:
            item, self._peek = self._peek, None
            return item
        while True:
            if self._getter is None:
                self._getter = asyncio.ensure_future(self.q.get())
            done, _ = await asyncio.wait({self._getter}, timeout=_POLL_S)
            if done:
                item, self._getter = self._getter.result(), None
                return item
            if await self.request.is_disconnected():
                self.cancel.set()
                return None

    def more_text(self) -> str:
        """Deltas that are already waiting, joined (one SSE chunk for a whole accepted run)."""
        parts = []
        while self._peek is None:
            try:
                item = self.q.get_nowait()
            except asyncio.QueueEmpty:
                break
            if item[0] == "delta":
                parts.append(item[1])
            else:
                self._peek = item
        return "".join(parts)

    def close(self) -> None:
        self.cancel.set()
        if self._getter is not None:
            self._getter.cancel()
            self._getter = None


class _SSEResponse(StreamingResponse):
    """A streaming response that cancels its generation however the response ends."""

    def __init__(self, content: AsyncIterator[str], exchange: _Exchange) -> None:
        super().__init__(content, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._exchange = exchange

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._exchange.close()


def _sse_error(exc: BaseException) -> str:
    """The last SSE events of a stream that failed: an OpenAI-style error, then [DONE]."""
    err = _error_of(exc)
    return _sse({"error": {"message": err.message, "type": err.type, "param": err.param,
                           "code": err.code}}) + "data: [DONE]\n\n"


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


def _error_of(exc: BaseException) -> _HTTPError:
    if isinstance(exc, _HTTPError):
        return exc
    if isinstance(exc, UserError):
        msg = str(exc)
        code = "context_length_exceeded" if "does not fit the context" in msg else None
        return _HTTPError(400, msg, code=code)
    if isinstance(exc, _Cancelled):
        return _HTTPError(503, "the request was cancelled", "server_error", code="cancelled")
    log.error("generation failed", exc_info=exc)
    return _HTTPError(500, f"internal error: {type(exc).__name__}: {exc}", "server_error")


async def _read_json(request: Request, limit: int) -> dict[str, Any]:
    """The request body as a JSON object: 413 past `limit` bytes, 400 for anything not JSON."""
    too_big = _HTTPError(413, f"the request body is over the limit of {limit} bytes",
                         code="request_too_large")
    length = request.headers.get("content-length")
    if length is not None:
        try:
            if int(length) > limit:
                raise too_big
        except ValueError:
            raise _HTTPError(400, "invalid Content-Length header") from None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_big
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _HTTPError(400, f"the request body is not valid JSON ({exc})",
                         code="invalid_json") from None
    if not isinstance(obj, dict):
        raise _HTTPError(400, "the request body must be a JSON object", code="invalid_json")
    try:  # JSON may escape lone surrogates ("\ud800"); no tokenizer can encode them
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise _HTTPError(400, "the request contains a lone UTF-16 surrogate (\\ud800-\\udfff), "
                         "which is not valid Unicode text", code="invalid_unicode") from None
    return obj


def _validate(model: type[BaseModel], obj: dict[str, Any]) -> Any:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        param = ".".join(str(p) for p in err["loc"]) or None
        msg = f"{param}: {err['msg']}" if param else err["msg"]
        if len(exc.errors()) > 1:
            msg += f" (and {len(exc.errors()) - 1} more problems)"
        raise _HTTPError(400, msg, param=param, code=err["type"]) from None


# ---------------------------------------------------------------------------------------------
# The app.


def create_app(engine: Any, settings: ServerSettings | None = None) -> FastAPI:
    """The ASGI app serving `engine` (an Engine, or a callable that builds one at startup).

    A factory runs in a background thread when the app starts, so ``/health`` answers (503)
    while the model loads.
    """
    settings = settings or ServerSettings()
    if settings.max_queue < 1:
        raise ValueError("max_queue must be at least 1")
    runner = _Runner(engine, settings)

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
    key = (settings.api_key or "").encode("utf-8")

    @app.exception_handler(_HTTPError)
    async def _on_http_error(_req: Request, exc: _HTTPError) -> JSONResponse:
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
            raise _HTTPError(401, msg, code="invalid_api_key",
                             headers={"WWW-Authenticate": "Bearer"})

    async def parse(request: Request, model: type[BaseModel]) -> Any:
        authorize(request)
        req = _validate(model, await _read_json(request, settings.max_body_bytes))
        runner.ready()
        return req

    def base(kind: str, prefix: str) -> dict[str, Any]:
        return {"id": f"{prefix}-{uuid.uuid4().hex[:24]}", "object": kind,
                "created": int(time.time()), "model": runner.model_id}

    async def start(request: Request, job: Callable[[Any, _Exchange], _Outcome],
                    stream: bool) -> tuple[_Exchange, tuple[str, Any] | None]:
        """Admit, queue, and wait for the first event (an error before output is an HTTP error)."""
        runner.admit()
        ex = _Exchange(request)
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
            raise _error_of(first[1])
        if first is None:
            ex.close()
        return ex, first

    def gen_job(prompt: Any, chat: bool, req: _GenRequest, texts: Sequence[str],
                stream: bool) -> Callable[[Any, _Exchange], _Outcome]:
        prediction = _text(req.prediction.content) if req.prediction else ""
        stops = _stops(req.stop)
        sampling = _sampling(req)
        max_tokens = req.max_completion_tokens or req.max_tokens

        def job(eng: Any, ex: _Exchange) -> _Outcome:
            refs = _references(prediction, texts, eng.config.max_reference_chars)
            res = eng.generate(prompt, max_tokens=max_tokens or eng.target.n_ctx, stop=stops,
                               sampling=sampling, references=refs, chat=chat,
                               on_delta=ex.on_delta if stream else None, cancel=ex.cancel)
            acc, rej = prediction_usage(eng.target, prediction, res.text) if prediction \
                else (0, 0)
            return _Outcome(res.text, res.stats, res.stats.finish_reason, acc, rej)

        return job

    async def generation(request: Request, req: _GenRequest, prompt: Any, chat: bool,
                         texts: Sequence[str]) -> Response:
        kind = "chat.completion" if chat else "text_completion"
        prefix = "chatcmpl" if chat else "cmpl"
        job = gen_job(prompt, chat, req, texts, req.stream)
        ex, first = await start(request, job, req.stream)
        if first is None:
            return Response(status_code=499)
        head = base(kind, prefix)
        if not req.stream:
            out: _Outcome = first[1]
            choice: dict[str, Any] = {"index": 0, "finish_reason": _FINISH[out.finish_reason]}
            if chat:
                choice["message"] = {"role": "assistant", "content": out.text, "refusal": None}
            else:
                choice.update(text=out.text, logprobs=None)
            choice["logprobs"] = None
            return JSONResponse({**head, "choices": [choice],
                                 "usage": _usage(out.stats, out.accepted, out.rejected,
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
            return _sse(obj)

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
                        yield chunk(None, _FINISH[val.finish_reason])
                        if include_usage:
                            yield _sse({**head, "choices": [],
                                        "usage": _usage(val.stats, val.accepted, val.rejected,
                                                        val.queue_ms)})
                        yield "data: [DONE]\n\n"
                        return
                    else:
                        yield _sse_error(val)
                        return
                    if await request.is_disconnected():
                        return
                    item = await ex.next()
            finally:
                ex.close()

        return _SSEResponse(events(), ex)

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
            raise _HTTPError(400, "logprobs are not supported", param="logprobs")
        messages = [{"role": "system" if m.role == "developer" else m.role,
                     "content": _text(m.content)} for m in req.messages]
        return await generation(request, req, messages, True, [m["content"] for m in messages])

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        req: CompletionRequest = await parse(request, CompletionRequest)
        if req.echo or req.logprobs:
            raise _HTTPError(400, "echo and logprobs are not supported",
                             param="echo" if req.echo else "logprobs")
        prompt = req.prompt
        if isinstance(prompt, list):
            if len(prompt) != 1:
                raise _HTTPError(400, "exactly one prompt per request is supported",
                                 param="prompt")
            prompt = prompt[0]
        if not prompt:
            raise _HTTPError(400, "prompt must not be empty", param="prompt")
        return await generation(request, req, prompt, False, [prompt])

    @app.post("/v1/apply")
    async def apply(request: Request) -> Response:
        req: ApplyRequest = await parse(request, ApplyRequest)
        from edge_spec.verify import SamplingConfig

        sampling = SamplingConfig(req.temperature or 0.0, 0, 1.0, req.seed)  # greedy default

        def job(eng: Any, ex: _Exchange) -> _Outcome:
            res = eng.apply(req.original, req.update, req.instruction, template=req.template,
                            lang=req.lang, max_tokens=req.max_tokens, sampling=sampling,
                            on_delta=ex.on_delta if req.stream else None, cancel=ex.cancel)
            return _Outcome(res.text, res.stats, res.stats.finish_reason)

        ex, first = await start(request, job, req.stream)
        if first is None:
            return Response(status_code=499)
        head = base("apply", "apply")

        def result(out: _Outcome) -> dict[str, Any]:
            return {**head, "merged": out.text, "finish_reason": _FINISH[out.finish_reason],
                    "usage": _usage(out.stats, queue_ms=out.queue_ms, details=False)}

        if not req.stream:
            return JSONResponse(result(first[1]))

        async def events() -> AsyncIterator[str]:
            item = first
            try:
                while item is not None:
                    kind_, val = item
                    if kind_ == "delta":
                        yield _sse({**head, "object": "apply.chunk",
                                    "delta": val + ex.more_text()})
                    elif kind_ == "done":
                        yield _sse(result(val))
                        yield "data: [DONE]\n\n"
                        return
                    else:
                        yield _sse_error(val)
                        return
                    if await request.is_disconnected():
                        return
                    item = await ex.next()
            finally:
                ex.close()

        return _SSEResponse(events(), ex)

    return app

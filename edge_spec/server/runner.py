"""The server's engine runner: model loading, admission, the single worker thread, and the
per-request exchange between the event loop and that thread (see `edge_spec.server.app`)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse

from edge_spec.engine import Engine
from edge_spec.errors import UserError
from edge_spec.server.errors import Cancelled, HTTPError, log, scrub_paths
from edge_spec.server.wire import Outcome, ServerSettings, sse_error

POLL_S = 0.25  # how often a waiting request checks whether its client is still there


def is_engine(obj: object) -> bool:
    return isinstance(obj, Engine)


def outcome_kind(exc: BaseException) -> str:
    """The health counter a job's exception counts under."""
    if isinstance(exc, Cancelled):
        return "cancelled"
    if isinstance(exc, UserError) or (isinstance(exc, HTTPError) and exc.status < 500):
        return "user_errors"
    return "failed"


class Runner:
    """Owns the engine, the admission count and the one worker thread that uses the engine."""

    def __init__(
        self,
        source: Engine | Callable[[], Engine],
        settings: ServerSettings,
        on_load_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.settings = settings
        self.on_load_error = on_load_error
        self._source = source
        self.engine: Engine | None = source if isinstance(source, Engine) else None
        if self.engine is None and not callable(source):
            raise TypeError("create_app needs an Engine or a callable that returns one")
        if self.engine is not None:
            self.engine.target  # noqa: B018 - a given engine serves with its model loaded
        self.load_error: str | None = None
        self.load_s = 0.0
        self._lock = threading.Lock()
        self.admitted = 0  # running + waiting
        self.running = 0
        # served / cancelled; rejected: 503 busy; bad_requests: refused before the queue (bad
        # body, key, Host...); user_errors: the engine found the input wrong (a merge not exact,
        # a prompt over the context); failed: internal errors only.
        self.counts = {
            "served": 0,
            "cancelled": 0,
            "rejected": 0,
            "bad_requests": 0,
            "user_errors": 0,
            "failed": 0,
        }
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
            assert not isinstance(self._source, Engine)
            engine = self._source()
            if not is_engine(engine):
                raise TypeError(f"the engine factory returned {type(engine).__name__}")
            engine.target  # noqa: B018 - the model loads now, not on the first request
        except BaseException as exc:
            self.load_error = scrub_paths(str(exc)) or type(exc).__name__
            if self.on_load_error is not None:
                self.on_load_error(exc)  # the CLI reports it and stops the server
            else:
                log.error("could not load the model: %s", exc)
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
            raise HTTPError(
                503,
                f"the model failed to load: {self.load_error}",
                "server_error",
                code="model_load_failed",
            )
        raise HTTPError(
            503,
            "the model is loading; retry shortly",
            "server_error",
            code="model_loading",
            headers={"Retry-After": "1"},
        )

    def admit(self) -> None:
        """Take a slot (running + waiting < max_queue) or raise a 503 with Retry-After."""
        with self._lock:
            if self._closed:
                self.counts["rejected"] += 1
                raise HTTPError(
                    503, "the server is shutting down", "server_error", code="shutting_down"
                )
            if self.admitted >= self.settings.max_queue:
                self.counts["rejected"] += 1
                raise HTTPError(
                    503,
                    f"the server is busy ({self.admitted} requests running or queued, "
                    f"limit {self.settings.max_queue}); retry shortly",
                    "server_error",
                    code="server_overloaded",
                    headers={"Retry-After": "1"},
                )
            self.admitted += 1

    def submit(
        self,
        job: Callable[[Engine], Outcome],
        cancel: threading.Event,
        push: Callable[[str, Any], None],
    ) -> None:
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
                    raise Cancelled()
                assert self.engine is not None, "submit before the model loaded"
                out = job(self.engine)
                out.queue_ms = queue_ms
                key = "cancelled" if out.finish_reason == "cancelled" else "served"
                with self._lock:
                    self.counts[key] += 1
                release(True)
                push("done", out)
            except BaseException as exc:
                with self._lock:
                    self.counts[outcome_kind(exc)] += 1
                release(True)
                push("error", exc)

        def dropped(fut: Any) -> None:
            if fut.cancelled():
                release(False)
                push("error", Cancelled())

        with self._lock:
            self._cancels.add(cancel)
        try:
            assert self._executor is not None, "the app's lifespan has not started"
            fut = self._executor.submit(work)
        except RuntimeError:  # shutting down
            release(False)
            push("error", Cancelled())
            return
        fut.add_done_callback(dropped)

    def count(self, key: str) -> None:
        with self._lock:
            self.counts[key] += 1

    def health(self) -> tuple[int, dict[str, Any]]:
        with self._lock:
            load = {
                "in_flight": self.admitted,
                "running": self.running,
                "waiting": self.admitted - self.running,
                "max_queue": self.settings.max_queue,
                **self.counts,
            }
        if self.engine is not None:
            return 200, {
                "status": "ok",
                "model": self.model_id,
                "load_s": round(self.load_s, 2),
                **load,
            }
        if self.load_error is not None:
            return 503, {"status": "error", "error": self.load_error}
        return 503, {"status": "loading"}

    def drain(self, grace_s: float) -> None:
        """Shutdown begins: nothing new is admitted, requests still waiting get 503 `cancelled`
        now, and the running one may finish until `grace_s` is nearly over, when it is
        cancelled too (its client gets 503 `cancelled`, or a stream an error event)."""
        with self._lock:
            self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        # The cancel lands within one verify step (longer on a loaded machine); the margin
        # leaves time to answer before the ASGI server's own deadline cancels the tasks.
        timer = threading.Timer(grace_s - min(2.0, grace_s / 3), self._cancel_all)
        timer.daemon = True
        timer.start()

    def _cancel_all(self) -> None:
        with self._lock:
            for ev in self._cancels:
                ev.set()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._cancel_all()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


class Exchange:
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
            done, _ = await asyncio.wait({self._getter}, timeout=POLL_S)
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


class SSEResponse(StreamingResponse):
    """A streaming response that cancels its generation however the response ends."""

    def __init__(self, content: AsyncIterator[str], exchange: Exchange) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._exchange = exchange

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except asyncio.CancelledError:
            # The ASGI server's shutdown deadline passed mid-stream: end the stream with the
            # documented error event, not a traceback (the task is cancelled once).
            end = {
                "type": "http.response.body",
                "body": sse_error(Cancelled()).encode(),
                "more_body": False,
            }
            with contextlib.suppress(Exception):
                await send(end)
        finally:
            self._exchange.close()

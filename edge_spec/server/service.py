"""What every route shares: authorization, body parsing, and starting a job on the engine."""

from __future__ import annotations

import asyncio
import hmac
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel

from edge_spec.engine import Engine
from edge_spec.server.body import read_json, validate_request
from edge_spec.server.errors import Cancelled, HTTPError, error_of
from edge_spec.server.runner import Exchange, Runner
from edge_spec.server.wire import Outcome, ServerSettings

M = TypeVar("M", bound=BaseModel)
Job = Callable[[Engine, Exchange], Outcome]
Event = tuple[str, Any]


class Service:
    """The runner and settings one app's routes use."""

    def __init__(self, runner: Runner, settings: ServerSettings) -> None:
        self.runner, self.settings = runner, settings
        self.key = (settings.api_key or "").encode("utf-8")

    def authorize(self, request: Request) -> None:
        if not self.key:
            return
        auth = request.headers.get("authorization", "")
        scheme, _, given = auth.partition(" ")
        ok = scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode("utf-8"), self.key
        )
        if not ok:
            msg = (
                "missing API key: send 'Authorization: Bearer KEY'"
                if not auth
                else "incorrect API key"
            )
            raise HTTPError(
                401, msg, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"}
            )

    async def parse(self, request: Request, model: type[M]) -> M:
        self.authorize(request)
        st = self.settings
        raw = await read_json(request, st.max_body_bytes, st.max_json_depth, st.body_timeout_s)
        req = validate_request(model, raw)
        self.runner.ready()
        return req

    def base(self, kind: str, prefix: str) -> dict[str, Any]:
        return {
            "id": f"{prefix}-{uuid.uuid4().hex[:24]}",
            "object": kind,
            "created": int(time.time()),
            "model": self.runner.model_id,
        }

    async def start(
        self, request: Request, job: Job, stream: bool
    ) -> tuple[Exchange, Event | None]:
        """Admit, queue, and wait for the first event (an error before output is an HTTP error)."""
        self.runner.admit()
        ex = Exchange(request)
        self.runner.submit(lambda eng: job(eng, ex), ex.cancel, ex.push)
        try:
            first = await ex.next()
            while not stream and first is not None and first[0] == "delta":
                first = await ex.next()
        except asyncio.CancelledError:
            # The ASGI server's shutdown deadline passed before the engine stopped: answer the
            # documented 503 rather than let the cancellation end in a bare 500.
            ex.close()
            raise error_of(Cancelled()) from None
        except BaseException:
            ex.close()
            raise
        if first is not None and first[0] == "done" and first[1].finish_reason == "cancelled":
            first = ("error", Cancelled())  # shutdown stopped it: no partial answer as a 200
        if first is not None and first[0] == "error":
            ex.close()
            err = error_of(first[1])
            err.counted = True  # the runner counted it
            raise err
        if first is None:
            ex.close()
        return ex, first

"""The server's routes, one router per group: health and models, OpenAI generation, apply."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from edge_spec.config.settings import SamplingSettings
from edge_spec.engine import Engine
from edge_spec.server.errors import Cancelled, HTTPError
from edge_spec.server.runner import Exchange, SSEResponse
from edge_spec.server.service import Event, Job, Service
from edge_spec.server.wire import (
    FINISH,
    ApplyRequest,
    ChatApply,
    ChatRequest,
    CompletionRequest,
    GenRequest,
    Outcome,
    chat_apply,
    prediction_account,
    references,
    sampling_of,
    sse,
    sse_error,
    stops_of,
    text_of,
    usage_of,
)


def meta_routes(svc: Service) -> APIRouter:
    """``GET /health`` (open, 503 while loading) and ``GET /v1/models``."""
    router = APIRouter()

    @router.get("/health")
    async def health() -> JSONResponse:
        status, body = svc.runner.health()
        return JSONResponse(
            body, status_code=status, headers={"Retry-After": "1"} if status == 503 else None
        )

    @router.get("/v1/models")
    async def models(request: Request) -> JSONResponse:
        svc.authorize(request)
        svc.runner.ready()
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": svc.runner.model_id,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "edge-spec",
                    }
                ],
            }
        )

    return router


def openai_routes(svc: Service) -> APIRouter:
    """``POST /v1/chat/completions`` and ``POST /v1/completions``."""
    router = APIRouter()

    @router.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        req = await svc.parse(request, ChatRequest)
        if req.logprobs:
            raise HTTPError(400, "logprobs are not supported", param="logprobs")
        messages = [
            {"role": "system" if m.role == "developer" else m.role, "content": text_of(m.content)}
            for m in req.messages
        ]
        ap = chat_apply(req, messages)
        job = (
            chat_apply_job(req, ap)
            if ap is not None
            else gen_job(messages, True, req, [m["content"] for m in messages])
        )
        return await generation(svc, request, req, True, job)

    @router.post("/v1/completions")
    async def completions(request: Request) -> Response:
        req = await svc.parse(request, CompletionRequest)
        if req.echo or req.logprobs:
            raise HTTPError(
                400, "echo and logprobs are not supported", param="echo" if req.echo else "logprobs"
            )
        prompt = req.prompt
        if isinstance(prompt, list):
            if len(prompt) != 1:
                raise HTTPError(400, "exactly one prompt per request is supported", param="prompt")
            prompt = prompt[0]
        if not prompt:
            raise HTTPError(400, "prompt must not be empty", param="prompt")
        return await generation(svc, request, req, False, gen_job(prompt, False, req, [prompt]))

    return router


def gen_job(
    prompt: str | list[dict[str, str]], chat: bool, req: GenRequest, texts: Sequence[str]
) -> Job:
    prediction = text_of(req.prediction.content) if req.prediction else ""
    stops = stops_of(req.stop)
    sampling = sampling_of(req)
    max_tokens = req.max_completion_tokens or req.max_tokens

    def job(eng: Engine, ex: Exchange) -> Outcome:
        refs = references(prediction, texts, eng.config.reference.max_reference_chars)
        res = eng.generate(
            prompt,
            max_tokens=max_tokens or eng.target.n_ctx,
            stop=stops,
            sampling=sampling,
            references=refs,
            chat=chat,
            on_delta=ex.on_delta if req.stream else None,
            cancel=ex.cancel,
        )
        account = prediction_account(eng.target, prediction, res.text) if prediction else None
        return Outcome(res.text, res.stats, res.stats.finish_reason, account=account)

    return job


def chat_apply_job(req: ChatRequest, ap: ChatApply) -> Job:
    """A chat that carries an apply runs the apply pipeline; the answer is the merged file."""
    prediction = text_of(req.prediction.content) if req.prediction else ""
    sampling = sampling_of(req) if req.temperature else SamplingSettings(seed=req.seed)
    max_tokens = req.max_completion_tokens or req.max_tokens

    def job(eng: Engine, ex: Exchange) -> Outcome:
        res = eng.apply(
            ap.original,
            ap.update,
            ap.instruction or None,
            lang=ap.lang,
            max_tokens=max_tokens,
            sampling=sampling,
            engine=req.engine,
            on_delta=ex.on_delta if req.stream else None,
            cancel=ex.cancel,
        )
        account = (
            prediction_account(eng.target, prediction, res.text)
            if prediction and res.engine != "merge"
            else None
        )
        return Outcome(
            res.text,
            res.stats,
            res.stats.finish_reason,
            account=account,
            lazy_lines=res.lazy_lines,
            apply=res.to_dict(),
        )

    return job


async def generation(
    svc: Service, request: Request, req: GenRequest, chat: bool, job: Job
) -> Response:
    """A chat or text completion: one JSON answer, or an SSE stream of chunks."""
    ex, first = await svc.start(request, job, req.stream)
    if first is None:
        return Response(status_code=499)
    head = svc.base(
        "chat.completion" if chat else "text_completion", "chatcmpl" if chat else "cmpl"
    )
    if not req.stream:
        out: Outcome = await first[1].settle()
        choice: dict[str, Any] = {"index": 0, "finish_reason": FINISH[out.finish_reason]}
        if chat:
            choice["message"] = {"role": "assistant", "content": out.text, "refusal": None}
        else:
            choice.update(text=out.text, logprobs=None)
        choice["logprobs"] = None
        extra = {"edge_spec_apply": out.apply} if out.apply else {}
        return JSONResponse(
            {
                **head,
                "choices": [choice],
                **extra,
                "usage": usage_of(out.stats, out.accepted, out.rejected, out.queue_ms),
            }
        )
    include_usage = bool(req.stream_options and req.stream_options.include_usage)
    head["object"] = "chat.completion.chunk" if chat else "text_completion"

    def chunk(delta: str | None, finish: str | None, role: bool = False) -> str:
        if chat:
            d: dict[str, Any] = (
                {"role": "assistant", "content": ""}
                if role
                else ({} if delta is None else {"content": delta})
            )
            c = {"index": 0, "delta": d, "logprobs": None, "finish_reason": finish}
        else:
            c = {"index": 0, "text": delta or "", "logprobs": None, "finish_reason": finish}
        obj = {**head, "choices": [c]}
        if include_usage:
            obj["usage"] = None
        return sse(obj)

    async def done(out: Outcome) -> AsyncIterator[str]:
        yield chunk(None, FINISH[out.finish_reason])
        if include_usage:
            await out.settle()
            yield sse(
                {
                    **head,
                    "choices": [],
                    "usage": usage_of(out.stats, out.accepted, out.rejected, out.queue_ms),
                }
            )

    async def delta(text: str) -> AsyncIterator[str]:
        yield chunk(text, None)

    opening = [chunk(None, None, role=True)] if chat else []
    return SSEResponse(stream_events(request, ex, first, delta, done, opening), ex)


def apply_routes(svc: Service) -> APIRouter:
    """``POST /v1/apply``: the merged file, at once or streamed."""
    router = APIRouter()

    @router.post("/v1/apply")
    async def apply(request: Request) -> Response:
        req = await svc.parse(request, ApplyRequest)
        ex, first = await svc.start(request, apply_job(req), req.stream)
        if first is None:
            return Response(status_code=499)
        head = svc.base("apply", "apply")

        def result(out: Outcome) -> dict[str, Any]:
            # lazy_lines: lines of `merged` where the model left a '... existing code ...'
            # marker instead of the code (the client decides: retry, naive merge, or show it).
            # engine: "merge" when the structural merge answered alone (no model ran);
            # verdicts per hunk; suspect: what the check found wrong with a model's file.
            return {
                **head,
                "merged": out.text,
                "finish_reason": FINISH[out.finish_reason],
                "lazy_lines": out.lazy_lines,
                **out.apply,
                "usage": usage_of(out.stats, queue_ms=out.queue_ms, details=False),
            }

        if not req.stream:
            return JSONResponse(result(first[1]))

        async def delta(text: str) -> AsyncIterator[str]:
            yield sse({**head, "object": "apply.chunk", "delta": text})

        async def done(out: Outcome) -> AsyncIterator[str]:
            yield sse(result(out))

        return SSEResponse(stream_events(request, ex, first, delta, done), ex)

    return router


def apply_job(req: ApplyRequest) -> Job:
    sampling = SamplingSettings(req.temperature or 0.0, 0, 1.0, req.seed)  # greedy default

    def job(eng: Engine, ex: Exchange) -> Outcome:
        res = eng.apply(
            req.original,
            req.update,
            req.instruction,
            template=req.template,
            lang=req.lang,
            max_tokens=req.max_tokens,
            sampling=sampling,
            on_delta=ex.on_delta if req.stream else None,
            cancel=ex.cancel,
            engine=req.engine,
            path=req.path,
            guard=req.guard,
        )
        return Outcome(
            res.text,
            res.stats,
            res.stats.finish_reason,
            lazy_lines=res.lazy_lines,
            apply=res.to_dict(),
        )

    return job


async def stream_events(
    request: Request,
    ex: Exchange,
    first: Event | None,
    delta: Callable[[str], AsyncIterator[str]],
    done: Callable[[Outcome], AsyncIterator[str]],
    opening: Sequence[str] = (),
) -> AsyncIterator[str]:
    """The SSE body: `opening`, a `delta` event per run of text, `done`'s events and [DONE];
    an error ends it with an error event. Ends quietly when the client goes away."""
    item = first
    try:
        for event in opening:
            yield event
        while item is not None:
            kind, val = item
            if kind == "delta":
                async for event in delta(val + ex.more_text()):
                    yield event
            elif kind == "done" and val.finish_reason == "cancelled":
                yield sse_error(Cancelled())  # shutdown stopped it mid-stream
                return
            elif kind == "done":
                async for event in done(val):
                    yield event
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

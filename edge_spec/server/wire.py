"""The server's wire format: request models, OpenAI-style errors, usage, SSE framing.

Everything here is pure request/response shaping; `edge_spec.server.app` wires it to the engine.
fastapi and pydantic come from the extra ``serve``.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import json
import logging
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from edge_spec.errors import UserError, require

require("fastapi", "serve")
require("pydantic", "serve")

from fastapi import Request  # noqa: E402
from fastapi.responses import JSONResponse  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field, ValidationError  # noqa: E402

from edge_spec.apply import MARKER, naive_merge  # noqa: E402
from edge_spec.config.settings import SamplingSettings, ServerSettings  # noqa: E402

log = logging.getLogger("edge_spec.server.app")

DEFAULT_MAX_BODY = ServerSettings.max_body_bytes
FINISH = {"eos": "stop", "stop": "stop", "length": "length", "cancelled": "stop"}


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


class GenRequest(_Base):
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


class ChatRequest(GenRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    logprobs: bool | None = None
    # A chat that carries an apply (see `chat_apply`): `apply` forces or forbids the detection,
    # `engine` picks the apply engine as on /v1/apply.
    apply: bool | None = None
    engine: Literal["auto", "model", "merge", "region"] = "auto"


@dataclass(frozen=True)
class ChatApply:
    """An apply found in a chat request: the file, the snippet and what the user asked."""

    original: str
    update: str
    instruction: str
    lang: str = ""  # the snippet fence's info string (```python): the merge's language


def chat_apply(req: ChatRequest, messages: Sequence[dict[str, str]]) -> ChatApply | None:
    """The apply a chat completion carries, or None for an ordinary chat.

    An apply is a Predicted Outputs request (the prediction is the original file) whose last
    user message holds a fenced snippet other than that file, or any chat with `apply: true`
    (the file then is the first code block). Two code blocks without either are a question
    about code, not an apply.
    """
    if req.apply is False:
        return None
    prediction = text_of(req.prediction.content) if req.prediction else ""
    users = [m["content"] for m in messages if m["role"] == "user"]
    if not users or not (prediction or req.apply):
        return None
    last = users[-1]
    blocks = code_blocks(last)
    original = prediction or next((b for t in users for b in code_blocks(t)), "")
    snippets = [b for b in blocks if b.strip() != original.strip()]
    if not original or not snippets:
        return None
    instruction = _FENCED.sub("", last).strip()
    tags = [m.group(2).strip().split(" ")[0] for m in _FENCE_TAG.finditer(last)]
    return ChatApply(original, snippets[-1], instruction[:2000], next(
        (t for t in reversed(tags) if t), ""))


class CompletionRequest(GenRequest):
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
    path: str | None = None  # the file's name: picks the structural merge's language
    engine: Literal["auto", "model", "merge", "region"] = "auto"
    # The decode-time guard on the model's answer; None: the server's (`serve --guard`).
    guard: Literal["order", "lines", "markers", "off"] | None = None


# ---------------------------------------------------------------------------------------------
# Helpers shared by the endpoints.


class HTTPError(Exception):
    """An OpenAI-style error response, raised from request handling."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = (
            status, message, type_, param, code)
        self.headers = headers
        self.counted = False  # already in a health counter (a job's error)

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, self.type, self.param, self.code,
                              self.headers)


class Cancelled(Exception):
    """The request was cancelled (client gone, shutdown) before it finished."""


def error_response(status: int, message: str, type_: str = "invalid_request_error",
                   param: str | None = None, code: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    """`{"error": {"message", "type", "param", "code"}}`, as OpenAI's API answers errors."""
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def text_of(content: str | list[TextPart] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content)


_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")


_FENCE_TAG = re.compile(r"^[ \t]*(`{3,}|~{3,})([^\n`]*)$", re.M)
_FENCED = re.compile(r"(`{3,}|~{3,})[^\n]*\n.*?(\n\1[ \t]*(?=\n|$)|\Z)", re.S)


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
    in the output" is the longest common subsequence of the two token lists, approximated as in
    `prediction_counts`.

    These counts are bookkeeping only: drafting speed does not depend on them, and the output is
    what the target alone would produce whatever the prediction says.
    """
    return prediction_account(target, prediction, output)()


def prediction_account(target: Any, prediction: str, output: str) -> Callable[[], tuple[int, int]]:
    """`prediction_usage` in two parts: tokenizing now (milliseconds, needs the model), the
    matching later, in the returned call (pure; the server runs it off the engine's thread)."""
    pred = target.tokenize(prediction, special=False) if prediction else []
    out = target.tokenize(output, special=False) if output and pred else []
    nl = frozenset(t for t in {*pred, *out} if b"\n" in target.token_bytes(t))
    return functools.partial(prediction_counts, pred, out, nl)


def prediction_counts(pred: Sequence[int], out: Sequence[int],
                      newline: frozenset[int] = frozenset()) -> tuple[int, int]:
    """(accepted, rejected) prediction tokens: a line-then-token diff, linear in practice.

    The token lists are cut into lines (a token holding a newline ends one) and diffed line by
    line (`difflib.SequenceMatcher`, ``autojunk=False``); only lines that differ are diffed
    token by token. A token-level diff of whole files costs seconds at a few thousand tokens
    (every common token's positions are scanned for every other), and an edit changes few lines.

    >>> prediction_counts([1, 9, 2, 3, 9], [1, 9, 2, 4, 9], frozenset({9}))
    (4, 1)
    """
    if not pred:
        return 0, 0
    a, b = _lines(pred, newline), _lines(out, newline)
    accepted = 0
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            accepted += sum(len(line) for line in a[i1:i2])
        elif op == "replace":
            x = [t for line in a[i1:i2] for t in line]
            y = [t for line in b[j1:j2] for t in line]
            # A huge rewritten block is rare; past the bound difflib's junk heuristic keeps
            # it fast at the price of some undercounting.
            junk = len(x) * len(y) > _TOKEN_DIFF_BOUND
            inner = difflib.SequenceMatcher(None, x, y, autojunk=junk)
            accepted += sum(m.size for m in inner.get_matching_blocks())
    return accepted, len(pred) - accepted


_TOKEN_DIFF_BOUND = 4_000_000


def _lines(tokens: Sequence[int], newline: frozenset[int]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []
    start = 0
    for i, t in enumerate(tokens):
        if t in newline:
            out.append(tuple(tokens[start:i + 1]))
            start = i + 1
    if start < len(tokens):
        out.append(tuple(tokens[start:]))
    return out


def references(prediction: str, texts: Sequence[str], cap: int) -> list[str]:
    """The prediction first, then the fenced code blocks of the messages (and, for an apply-style
    chat with two or more blocks, the naive merge of the last into the first), within `cap`."""
    refs = [prediction] if prediction else []
    blocks = [b for t in texts for b in code_blocks(t)]
    extra: list[str] = []
    if len(blocks) >= 2:
        if any(MARKER.match(line) for line in blocks[-1].splitlines()):
            with contextlib.suppress(Exception):  # a drafting hint only
                extra.append(naive_merge(blocks[0], blocks[-1]))
    total = sum(len(r) for r in refs)
    for b in [*extra, *blocks]:
        if b not in refs and total + len(b) <= cap:
            refs.append(b)
            total += len(b)
    return refs


def sampling_of(req: Any) -> Any:
    temp = 1.0 if req.temperature is None else req.temperature  # OpenAI's default
    return SamplingSettings(temp, req.top_k or 0, 1.0 if req.top_p is None else req.top_p,
                            req.seed)


def stops_of(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if len(stops) > 16:
        raise HTTPError(400, "at most 16 stop strings are supported", param="stop")
    return tuple(s for s in stops if s)


def usage_of(stats: Any, accepted: int = 0, rejected: int = 0, queue_ms: float = 0.0,
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
class Outcome:
    text: str
    stats: Any
    finish_reason: str
    accepted: int = 0
    rejected: int = 0
    queue_ms: float = 0.0
    lazy_lines: list[int] = field(default_factory=list)
    apply: dict[str, Any] = field(default_factory=dict)  # engine, verdicts, suspect
    # The prediction accounting still to run (`prediction_account`), off the engine's thread.
    account: Callable[[], tuple[int, int]] | None = None

    async def settle(self) -> Outcome:
        """Run the pending prediction accounting in a worker thread; `accepted`/`rejected` set."""
        if self.account is not None:
            self.accepted, self.rejected = await asyncio.to_thread(self.account)
            self.account = None
        return self


def sse_error(exc: BaseException) -> str:
    """The last SSE events of a stream that failed: an OpenAI-style error, then [DONE]."""
    err = error_of(exc)
    return sse({"error": {"message": err.message, "type": err.type, "param": err.param,
                           "code": err.code}}) + "data: [DONE]\n\n"


def sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


def error_of(exc: BaseException) -> HTTPError:
    """The answer to what a job raised: a user error's 400 (with `code` and `param`), 503
    `cancelled`, or a 500 that names the error's type and an id to find it in the server log
    (never its text, which may hold file paths)."""
    if isinstance(exc, HTTPError):
        return exc
    if isinstance(exc, UserError):
        return user_error(str(exc))
    if isinstance(exc, Cancelled):
        return HTTPError(503, "the request was cancelled", "server_error", code="cancelled")
    ref = uuid.uuid4().hex[:12]
    log.error("generation failed (error id %s)", ref, exc_info=exc)
    return HTTPError(500, f"internal error ({type(exc).__name__}); the server log has the "
                     f"details under error id {ref}", "server_error", code="internal_error")


# A user error from the engine, by its message: (pattern, code, the JSON field at fault).
_USER_ERRORS = (
    (r"does not fit the context|context full|longer than the context", "context_length_exceeded",
     None),
    (r"^hunk \d+ \(snippet lines", "merge_not_exact", "engine"),
    (r"the snippet has no code to merge", "merge_not_exact", "update"),
    (r"^references total", "references_too_large", "prediction"),
    (r"^unknown template", "invalid_value", "template"),
    (r"^unknown guard", "invalid_value", "guard"),
    (r"^unknown apply engine", "invalid_value", "engine"),
    (r"existing code \.\.\.' marker\(s\)", "lazy_output", None),
    (r"not valid Unicode", "invalid_unicode", None),
    (r"chat template", "chat_template_error", "messages"),
    (r"^empty prompt", "invalid_value", "prompt"),
)
# Command-line flags an engine message may name, and the request field that sets the same.
_FLAG_FIELDS = {"--engine": "engine", "--guard": "guard", "--template": "template",
                "--max-tokens": "max_tokens", "--lang": "lang", "--instruction": "instruction"}
_FLAG = re.compile("|".join(re.escape(f) for f in _FLAG_FIELDS) + r"(?![\w-])")


def user_error(message: str) -> HTTPError:
    """A 400 for an engine's user error: its code and field, flags named as JSON fields.

    >>> e = user_error("hunk 1 (snippet lines 1-2) is unsure: x; use --engine auto or model")
    >>> e.code, e.param, e.message.endswith("use engine auto or model")
    ('merge_not_exact', 'engine', True)
    """
    code, param = "invalid_request", None
    for pattern, code_, param_ in _USER_ERRORS:
        if re.search(pattern, message):
            code, param = code_, param_
            break
    fields = [_FLAG_FIELDS[m.group(0)] for m in _FLAG.finditer(message)]
    text = _FLAG.sub(lambda m: _FLAG_FIELDS[m.group(0)], scrub_paths(message))
    return HTTPError(400, text, param=param or (fields[0] if fields else None), code=code)


_PATH = re.compile(r"(?<![\w.~:/-])(?:[A-Za-z]:\\|~?/)(?:[^\s'\":,;()]+[/\\])+([^\s'\":,;()]*)")


def scrub_paths(message: str) -> str:
    """`message` with absolute file paths cut to their last part (a client sees no paths).

    >>> scrub_paths("/home/me/models/x.gguf: llama.cpp could not load ('~/m/y.bin')")
    "x.gguf: llama.cpp could not load ('y.bin')"
    """
    return _PATH.sub(lambda m: m.group(1) or "<path>", message)


async def read_json(request: Request, limit: int,
                    max_depth: int = ServerSettings.max_json_depth,
                    timeout_s: float | None = ServerSettings.body_timeout_s) -> dict[str, Any]:
    """The request body as a JSON object: 415 unless sent as ``application/json`` (a web page
    cannot send that cross-site without a preflight), 413 past `limit` bytes, 408 when it takes
    longer than `timeout_s` to arrive, 400 for anything not JSON or nested deeper than
    `max_depth`."""
    ctype = request.headers.get("content-type", "")
    if ctype.partition(";")[0].strip().lower() != "application/json":
        raise HTTPError(415, f"the request body must be sent as Content-Type: application/json "
                        f"(got {ctype[:80]!r})", code="unsupported_media_type")
    too_big = HTTPError(413, f"the request body is over the limit of {limit} bytes",
                         code="request_too_large")
    length = request.headers.get("content-length")
    if length is not None:
        try:
            if int(length) > limit:
                raise too_big
        except ValueError:
            raise HTTPError(400, "invalid Content-Length header") from None
    body = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise too_big
    except TimeoutError:
        raise HTTPError(408, f"the request body did not arrive within {timeout_s:g} s",
                        code="request_timeout") from None
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HTTPError(400, f"the request body is not valid JSON ({exc})",
                         code="invalid_json") from None
    except RecursionError:  # the parser recurses per level: far too deep for the check below
        raise too_deep(max_depth) from None
    if json_depth(obj) > max_depth:
        raise too_deep(max_depth)
    if not isinstance(obj, dict):
        raise HTTPError(400, "the request body must be a JSON object", code="invalid_json")
    try:  # JSON may escape lone surrogates ("\ud800"); no tokenizer can encode them
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise HTTPError(400, "the request contains a lone UTF-16 surrogate (\\ud800-\\udfff), "
                         "which is not valid Unicode text", code="invalid_unicode") from None
    return obj


def too_deep(max_depth: int) -> HTTPError:
    return HTTPError(400, f"the request body nests JSON deeper than {max_depth} levels",
                     code="invalid_json")


def json_depth(obj: Any) -> int:
    """How deeply lists and objects nest in `obj` (a scalar: 0), without recursing.

    >>> json_depth({"a": [1, {"b": []}]}), json_depth(3)
    (4, 0)
    """
    deepest, stack = 0, [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(
            item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((c, depth + 1) for c in children)
    return deepest


def validate_request(model: type[BaseModel], obj: dict[str, Any]) -> Any:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        param = ".".join(str(p) for p in err["loc"]) or None
        msg = f"{param}: {err['msg']}" if param else err["msg"]
        if len(exc.errors()) > 1:
            msg += f" (and {len(exc.errors()) - 1} more problems)"
        raise HTTPError(400, msg, param=param, code=err["type"]) from None



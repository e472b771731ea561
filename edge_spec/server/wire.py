"""The server's wire format: request models, OpenAI-style errors, usage, SSE framing.

Everything here is pure request/response shaping; `edge_spec.server.app` wires it to the engine,
`edge_spec.server.errors` shapes errors, `edge_spec.server.body` reads bodies.
fastapi and pydantic come from the extra ``serve``.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from edge_spec.errors import require

require("fastapi", "serve")
require("pydantic", "serve")

from pydantic import BaseModel, ConfigDict, Field  # noqa: E402

from edge_spec.apply import MARKER, naive_merge  # noqa: E402
from edge_spec.config.settings import SamplingSettings, ServerSettings  # noqa: E402
from edge_spec.server.errors import HTTPError, error_of  # noqa: E402

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
    seed: int | None = Field(None, ge=0)
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
    return ChatApply(
        original, snippets[-1], instruction[:2000], next((t for t in reversed(tags) if t), "")
    )


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
    seed: int | None = Field(None, ge=0)
    template: str | None = None
    lang: str = ""
    path: str | None = None  # the file's name: picks the structural merge's language
    engine: Literal["auto", "model", "merge", "region"] = "auto"
    # The decode-time guard on the model's answer; None: the server's (`serve --guard`).
    guard: Literal["order", "lines", "markers", "off"] | None = None


# ---------------------------------------------------------------------------------------------
# Helpers shared by the endpoints.


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
        if (
            m
            and m.group(1)[0] == fence[0]
            and len(m.group(1)) >= len(fence)
            and not line[m.end() :].strip()
        ):
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


def prediction_counts(
    pred: Sequence[int], out: Sequence[int], newline: frozenset[int] = frozenset()
) -> tuple[int, int]:
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
            out.append(tuple(tokens[start : i + 1]))
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
    return SamplingSettings(temp, req.top_k or 0, 1.0 if req.top_p is None else req.top_p, req.seed)


def stops_of(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if len(stops) > 16:
        raise HTTPError(400, "at most 16 stop strings are supported", param="stop")
    return tuple(s for s in stops if s)


def usage_of(
    stats: Any, accepted: int = 0, rejected: int = 0, queue_ms: float = 0.0, details: bool = True
) -> dict[str, Any]:
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
    return (
        sse(
            {
                "error": {
                    "message": err.message,
                    "type": err.type,
                    "param": err.param,
                    "code": err.code,
                }
            }
        )
        + "data: [DONE]\n\n"
    )


def sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"

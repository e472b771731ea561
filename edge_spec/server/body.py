"""Reading a request body: JSON only, bounded in size, depth and time, validated by pydantic."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import Request
from pydantic import BaseModel, ValidationError

from edge_spec.config.settings import ServerSettings
from edge_spec.server.errors import HTTPError


async def read_json(
    request: Request,
    limit: int,
    max_depth: int = ServerSettings.max_json_depth,
    timeout_s: float | None = ServerSettings.body_timeout_s,
) -> dict[str, Any]:
    """The request body as a JSON object: 415 unless sent as ``application/json`` (a web page
    cannot send that cross-site without a preflight), 413 past `limit` bytes, 408 when it takes
    longer than `timeout_s` to arrive, 400 for anything not JSON or nested deeper than
    `max_depth`."""
    ctype = request.headers.get("content-type", "")
    if ctype.partition(";")[0].strip().lower() != "application/json":
        raise HTTPError(
            415,
            f"the request body must be sent as Content-Type: application/json (got {ctype[:80]!r})",
            code="unsupported_media_type",
        )
    too_big = HTTPError(
        413, f"the request body is over the limit of {limit} bytes", code="request_too_large"
    )
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
        raise HTTPError(
            408, f"the request body did not arrive within {timeout_s:g} s", code="request_timeout"
        ) from None
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HTTPError(
            400, f"the request body is not valid JSON ({exc})", code="invalid_json"
        ) from None
    except RecursionError:  # the parser recurses per level: far too deep for the check below
        raise too_deep(max_depth) from None
    if json_depth(obj) > max_depth:
        raise too_deep(max_depth)
    if not isinstance(obj, dict):
        raise HTTPError(400, "the request body must be a JSON object", code="invalid_json")
    try:  # JSON may escape lone surrogates ("\ud800"); no tokenizer can encode them
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise HTTPError(
            400,
            "the request contains a lone UTF-16 surrogate (\\ud800-\\udfff), "
            "which is not valid Unicode text",
            code="invalid_unicode",
        ) from None
    return obj


def too_deep(max_depth: int) -> HTTPError:
    return HTTPError(
        400, f"the request body nests JSON deeper than {max_depth} levels", code="invalid_json"
    )


def json_depth(obj: Any) -> int:
    """How deeply lists and objects nest in `obj` (a scalar: 0), without recursing.

    >>> json_depth({"a": [1, {"b": []}]}), json_depth(3)
    (4, 0)
    """
    deepest, stack = 0, [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
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

"""The server's errors: OpenAI-style error bodies, and what a job's exception answers.

Every refusal is ``{"error": {"message", "type", "param", "code"}}`` as OpenAI's API answers;
`error_of` maps what a job raised to one (a user error's code and the JSON field at fault, 503
`cancelled`, or a 500 that names no path). fastapi comes from the extra ``serve``.
"""

from __future__ import annotations

import logging
import re
import uuid

from edge_spec.errors import UserError, require

require("fastapi", "serve")

from fastapi.responses import JSONResponse  # noqa: E402

log = logging.getLogger("edge_spec.server.app")


class HTTPError(Exception):
    """An OpenAI-style error response, raised from request handling."""

    def __init__(
        self,
        status: int,
        message: str,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = (
            status,
            message,
            type_,
            param,
            code,
        )
        self.headers = headers
        self.counted = False  # already in a health counter (a job's error)

    def response(self) -> JSONResponse:
        return error_response(
            self.status, self.message, self.type, self.param, self.code, self.headers
        )


class Cancelled(Exception):
    """The request was cancelled (client gone, shutdown) before it finished."""


def error_response(
    status: int,
    message: str,
    type_: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """`{"error": {"message", "type", "param", "code"}}`, as OpenAI's API answers errors."""
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


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
    return HTTPError(
        500,
        f"internal error ({type(exc).__name__}); the server log has the "
        f"details under error id {ref}",
        "server_error",
        code="internal_error",
    )


# A user error from the engine, by its message: (pattern, code, the JSON field at fault).
_USER_ERRORS = (
    (
        r"does not fit the context|context full|longer than the context",
        "context_length_exceeded",
        None,
    ),
    (r"^hunk \d+ \(snippet lines", "merge_not_exact", "engine"),
    (r"the snippet has no code to merge", "merge_not_exact", "update"),
    (r"^the edit snippet has no lines to apply", "empty_update", "update"),
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
_FLAG_FIELDS = {
    "--engine": "engine",
    "--guard": "guard",
    "--template": "template",
    "--max-tokens": "max_tokens",
    "--lang": "lang",
    "--instruction": "instruction",
}
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

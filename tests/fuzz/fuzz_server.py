"""Server request-parser fuzz harness: random bodies and headers against the real ASGI app.

The app runs in-process (starlette's TestClient) over an Engine on the fake byte-level runtime,
so every request that parses also generates. The property: any body gets a well-formed answer
(200 with a completion object, or 4xx with an OpenAI-style error object), never a 500, never a
hang. Shared by tests/server/test_fuzz_server.py (hypothesis) and tests/fuzz/atheris_server.py.

Example: `check_request(make_client(), "/v1/completions", b'{"prompt": "x"}', {})`.
"""

from __future__ import annotations

import json
from typing import Any

from edge_spec.engine import Engine, EngineConfig
from edge_spec.runtimes.fake import FakeRuntime
from edge_spec.server.app import ServerSettings, create_app

ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/apply")
MAX_BODY = 4096
# 503 only when the queue is full (never here: requests run one at a time).
OK_STATUS = {200, 400, 401, 404, 405, 413, 415, 422}


def make_client(api_key: str | None = None):  # noqa: ANN201 - a TestClient
    """A TestClient over the app; a small context keeps generation and limits cheap."""
    from starlette.testclient import TestClient

    engine = Engine(
        FakeRuntime(follow="def f(x):\n    return x\n", n_ctx=512),
        None,
        EngineConfig().override(kind="reference"),
    )
    app = create_app(engine, ServerSettings(api_key=api_key, max_body_bytes=MAX_BODY))
    client = TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=True)
    client.__enter__()  # runs the lifespan: the engine is ready before the first request
    return client


def check_request(client: Any, path: str, body: bytes, headers: dict[str, str]) -> int:
    """POST `body`; assert the answer is well formed; return the status."""
    r = client.post(path, content=body, headers={"content-type": "application/json", **headers})
    assert r.status_code in OK_STATUS, (r.status_code, r.text[:300])
    ctype = r.headers.get("content-type", "")
    if r.status_code != 200:
        err = r.json()["error"]
        assert isinstance(err["message"], str) and err["message"], err
        assert "\n" not in err["message"] and "Traceback" not in err["message"], err
        return r.status_code
    if ctype.startswith("text/event-stream"):
        _check_sse(r.text)
    else:
        obj = r.json()
        assert obj.get("object") in ("chat.completion", "text_completion", "apply"), obj
        assert "usage" in obj, obj
    return 200


def _check_sse(text: str) -> None:
    events = [ln[6:] for ln in text.splitlines() if ln.startswith("data: ")]
    assert events and events[-1] == "[DONE]", text[-300:]
    for e in events[:-1]:
        json.loads(e)  # every event is one JSON object (errors included)


def body_from(obj: Any) -> bytes:
    """JSON-encode a generated request object (non-JSON values become strings)."""
    return json.dumps(obj, default=str).encode()

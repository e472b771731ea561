"""The server probed as an outside tester would: hostile headers, bodies and clients.

A real uvicorn server on a socket over an Engine on the fake runtime (every request that parses
also generates). One table of probes; every row must get a clean 4xx/503 with an OpenAI-style
error body, and the server must be healthy after it, with no traceback in its log.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")

from edge_spec.engine import Engine, EngineConfig  # noqa: E402
from edge_spec.runtimes.fake import FakeRuntime  # noqa: E402
from edge_spec.server.app import ServerSettings, create_app  # noqa: E402
from edge_spec.server.serving import make_server  # noqa: E402

CHAT = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
JSON = {"content-type": "application/json"}
ORIGIN_OK = "vscode-webview://abc123"
STALL_S = 1.0  # the probe server's header and body timeouts
HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def _deep(n: int) -> str:
    return '{"messages": ' + "[" * n + "]" * n + "}"


def _start(
    settings: ServerSettings,
    engine: Engine | None = None,
) -> tuple[uvicorn.Server, threading.Thread, str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(engine or _engine(), settings)
    server = make_server(app, settings, log_config=None)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{port}"


def _engine() -> Engine:
    return Engine(
        FakeRuntime(follow="def f(x):\n    return x\n", n_ctx=512),
        None,
        EngineConfig().override(kind="reference"),
    )


@pytest.fixture(scope="module")
def srv() -> Iterator[SimpleNamespace]:
    settings = ServerSettings(
        max_queue=4,
        allowed_origins=("vscode-webview://*",),
        header_timeout_s=STALL_S,
        body_timeout_s=STALL_S,
    )
    engine = _engine()
    server, thread, base = _start(settings, engine)
    try:
        yield SimpleNamespace(
            base=base, port=int(base.rsplit(":", 1)[1]), settings=settings, engine=engine
        )
    finally:
        server.should_exit = True
        thread.join(10)


# id, method, path, headers, body, status, code
PROBES = [
    (
        "text/plain body",
        "POST",
        "/v1/chat/completions",
        {"content-type": "text/plain"},
        CHAT,
        415,
        "unsupported_media_type",
    ),
    (
        "form body",
        "POST",
        "/v1/apply",
        {"content-type": "application/x-www-form-urlencoded"},
        "original=a&update=b",
        415,
        "unsupported_media_type",
    ),
    (
        "no content type",
        "POST",
        "/v1/completions",
        {},
        '{"prompt": "x"}',
        415,
        "unsupported_media_type",
    ),
    (
        "multipart",
        "POST",
        "/v1/chat/completions",
        {"content-type": "multipart/form-data; boundary=x"},
        "--x--",
        415,
        "unsupported_media_type",
    ),
    (
        "rebinding Host",
        "POST",
        "/v1/chat/completions",
        {**JSON, "host": "evil.example:8080"},
        CHAT,
        403,
        "host_not_allowed",
    ),
    (
        "rebinding Host, GET",
        "GET",
        "/v1/models",
        {"host": "attacker.example"},
        None,
        403,
        "host_not_allowed",
    ),
    (
        "rebinding Host, health",
        "GET",
        "/health",
        {"host": "127.0.0.1.evil.example"},
        None,
        403,
        "host_not_allowed",
    ),
    (
        "foreign Origin",
        "POST",
        "/v1/chat/completions",
        {**JSON, "origin": "https://evil.example"},
        CHAT,
        403,
        "origin_not_allowed",
    ),
    (
        "null Origin",
        "POST",
        "/v1/apply",
        {**JSON, "origin": "null"},
        '{"original": "a", "update": "b"}',
        403,
        "origin_not_allowed",
    ),
    (
        "foreign Origin, simple POST",
        "POST",
        "/v1/completions",
        {"content-type": "text/plain", "origin": "http://evil.example"},
        '{"prompt": "x"}',
        403,
        "origin_not_allowed",
    ),
    (
        "foreign Origin, preflight",
        "OPTIONS",
        "/v1/chat/completions",
        {"origin": "https://evil.example", "access-control-request-method": "POST"},
        None,
        403,
        "origin_not_allowed",
    ),
    ("nested 1000 lists", "POST", "/v1/chat/completions", JSON, _deep(1000), 400, "invalid_json"),
    (
        "nested 100000 lists",
        "POST",
        "/v1/chat/completions",
        JSON,
        _deep(100_000),
        400,
        "invalid_json",
    ),
    (
        "nested 1000 objects",
        "POST",
        "/v1/apply",
        JSON,
        '{"a": ' * 1000 + "1" + "}" * 1000,
        400,
        "invalid_json",
    ),
    (
        "nested past the depth limit",
        "POST",
        "/v1/completions",
        JSON,
        _deep(80),
        400,
        "invalid_json",
    ),
    # A client that sends part of a request and stalls ("RAW": these bytes, then nothing).
    ("stalled before sending", "RAW", "", {}, b"", 408, "request_timeout"),
    ("stalled in the request line", "RAW", "", {}, b"POST /v1/chat/compl", 408, "request_timeout"),
    ("stalled in the headers", "RAW", "", {}, HEAD + b"Content-Type: app", 408, "request_timeout"),
    (
        "stalled in the body",
        "RAW",
        "",
        {},
        HEAD + b"Content-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n" + CHAT.encode()[:10],
        408,
        "request_timeout",
    ),
    (
        "stalled in a chunked body",
        "RAW",
        "",
        {},
        HEAD + b"Content-Type: application/json\r\n"
        b'Transfer-Encoding: chunked\r\n\r\n5\r\n{"mes\r\n',
        408,
        "request_timeout",
    ),
    ("not JSON", "POST", "/v1/completions", JSON, "{nope", 400, "invalid_json"),
    ("JSON array", "POST", "/v1/apply", JSON, "[1, 2]", 400, "invalid_json"),
]


def _healthy(srv: SimpleNamespace) -> None:
    r = httpx.get(f"{srv.base}/health")
    assert r.status_code == 200, r.text
    assert r.json()["in_flight"] == 0 and r.json()["status"] == "ok"
    r = httpx.post(f"{srv.base}/v1/completions", json={"prompt": "def f(x):", "max_tokens": 4})
    assert r.status_code == 200 and r.json()["choices"][0]["text"], r.text


def _no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not bad, [r.getMessage() for r in bad]


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "status", "code"),
    [p[1:] for p in PROBES],
    ids=[p[0] for p in PROBES],
)
def test_probe(
    srv: SimpleNamespace,
    caplog: pytest.LogCaptureFixture,
    method: str,
    path: str,
    headers: dict[str, str],
    body: str | None,
    status: int,
    code: str,
) -> None:
    caplog.set_level(logging.INFO)
    before = _counts(srv)
    if method == "RAW":
        r = _stall(srv.port, body)
    else:
        r = httpx.request(method, f"{srv.base}{path}", headers=headers, content=body, timeout=30)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json", r.headers
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == code, err
    assert err["message"] and "\n" not in err["message"] and "Traceback" not in err["message"]
    assert "access-control-allow-origin" not in r.headers
    after = _counts(srv)
    # A refusal before any request was parsed is the protocol's, not the app's.
    refused_early = method == "RAW" and b"Content-Length" not in body and b"chunked" not in body
    assert after["bad_requests"] == before["bad_requests"] + (not refused_early), (before, after)
    assert after["failed"] == before["failed"] and after["user_errors"] == before["user_errors"]
    _healthy(srv)
    _no_traceback(caplog)


def _stall(port: int, sent: bytes, limit: float = 30) -> httpx.Response:
    """Send `sent` on a raw socket, then nothing: the server must answer and close within
    `limit` seconds. The answer, parsed."""
    with socket.create_connection(("127.0.0.1", port), timeout=limit) as sock:
        sock.sendall(sent)
        t0, data = time.monotonic(), b""
        while chunk := sock.recv(65536):
            data += chunk
        took = time.monotonic() - t0
    assert took < limit and data, (took, data)
    head, _, payload = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    if headers.get("transfer-encoding") == "chunked":
        size, _, rest = payload.partition(b"\r\n")
        payload = rest[: int(size, 16)]
    return httpx.Response(int(lines[0].split()[1]), headers=headers, content=payload)


def _counts(srv: SimpleNamespace) -> dict:
    return httpx.get(f"{srv.base}/health").json()


ORIG = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
LOST = "# ... existing code ...\nvalue = compute_something_new()\n# ... existing code ...\n"


def test_user_errors_are_not_failures(srv: SimpleNamespace) -> None:
    before = _counts(srv)
    for _ in range(3):
        r = httpx.post(
            f"{srv.base}/v1/apply",
            json={"original": ORIG, "update": LOST, "engine": "merge", "path": "x.py"},
        )
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["code"] == "merge_not_exact" and err["param"] == "engine", err
        assert "--engine" not in err["message"] and "engine auto" in err["message"], err
    r = httpx.post(f"{srv.base}/v1/completions", json={"prompt": "x " * 600, "max_tokens": 4})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "context_length_exceeded"
    after = _counts(srv)
    assert after["user_errors"] == before["user_errors"] + 4, (before, after)
    assert after["failed"] == before["failed"] and after["bad_requests"] == before["bad_requests"]
    _healthy(srv)


def test_internal_error_names_no_path(
    srv: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(*_a: object, **_k: object) -> None:
        raise OSError("cannot map /home/someone/.cache/edge-spec/models/secret.gguf")

    monkeypatch.setattr(srv.engine, "generate", boom)
    before = _counts(srv)
    body = {"prompt": "def f(x):", "max_tokens": 4}
    r = httpx.post(f"{srv.base}/v1/completions", json=body)
    assert r.status_code == 500, r.text
    err = r.json()["error"]
    assert err["code"] == "internal_error" and err["type"] == "server_error", err
    assert "/" not in err["message"] and "secret" not in err["message"], err
    assert "OSError" in err["message"]
    streamed = httpx.post(f"{srv.base}/v1/completions", json={**body, "stream": True}).text
    assert "internal_error" in streamed and "secret" not in streamed, streamed
    after = _counts(srv)
    assert after["failed"] == before["failed"] + 2 and after["user_errors"] == before["user_errors"]
    ref = err["message"].rsplit(" ", 1)[1]
    assert any(ref in rec.getMessage() and rec.exc_info for rec in caplog.records)
    monkeypatch.undo()
    _healthy(srv)


def test_allowed_hosts_and_origins_pass(srv: SimpleNamespace) -> None:
    body = {"prompt": "def f(x):", "max_tokens": 4}
    for host in ("localhost", f"localhost:{srv.port}", "127.0.0.1", "[::1]:9", "app.localhost"):
        r = httpx.post(f"{srv.base}/v1/completions", json=body, headers={"host": host})
        assert r.status_code == 200, (host, r.text)
    for origin in (f"http://localhost:{srv.port}", "http://127.0.0.1:3000", ORIGIN_OK):
        r = httpx.post(f"{srv.base}/v1/completions", json=body, headers={"origin": origin})
        assert r.status_code == 200, (origin, r.text)
        assert r.headers["access-control-allow-origin"] == origin
        pre = httpx.options(
            f"{srv.base}/v1/completions",
            headers={
                "origin": origin,
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type, authorization",
            },
        )
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == origin
    r = httpx.post(
        f"{srv.base}/v1/completions",
        json=body,
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert r.status_code == 200, r.text


def test_allowed_hosts_setting() -> None:
    settings = ServerSettings(allowed_hosts=("box.lan", "*.corp.example"))
    server, thread, base = _start(settings)
    try:
        for host, status in (
            ("box.lan:8080", 200),
            ("a.corp.example", 200),
            ("BOX.LAN", 200),
            ("corp.example", 403),
            ("box.lan.evil.example", 403),
        ):
            r = httpx.get(f"{base}/v1/models", headers={"host": host})
            assert r.status_code == status, (host, r.text)
    finally:
        server.should_exit = True
        thread.join(10)


def test_connection_limit() -> None:
    settings = ServerSettings(max_connections=4, header_timeout_s=30)
    server, thread, base = _start(settings)
    port = int(base.rsplit(":", 1)[1])
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    try:
        time.sleep(0.2)
        r = httpx.get(f"{base}/health", timeout=10)
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        assert r.json()["error"]["code"] == "server_overloaded"
        for s in idle:
            s.close()
        time.sleep(0.2)
        r = httpx.get(f"{base}/health", timeout=10)
        assert r.status_code == 200, r.text
    finally:
        for s in idle:
            s.close()
        server.should_exit = True
        thread.join(10)


@pytest.mark.parametrize("stream", [True, False], ids=["running stream", "running request"])
def test_shutdown_past_the_deadline_ends_cleanly(
    stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """An engine that ignores its cancel outlives the graceful timeout; the running request
    still ends with the documented 503 `cancelled` (a stream: an error event), the queued one
    gets it at once, and nothing logs a traceback."""
    caplog.set_level(logging.INFO)
    engine = _engine()
    real = engine.generate

    def stubborn(*args: object, **kw: object) -> object:
        on_delta = kw.get("on_delta")
        for _ in range(60):  # about 3 s, whatever `cancel` says
            time.sleep(0.05)
            if on_delta is not None:
                on_delta("x")
        return real(*args, **kw)

    engine.generate = stubborn  # type: ignore[method-assign]
    server, thread, base = _start(ServerSettings(shutdown_grace_s=1.0), engine)
    results: dict[str, tuple[int, str]] = {}

    def post(name: str, body: dict) -> None:
        r = httpx.post(f"{base}/v1/completions", json=body, timeout=30)
        results[name] = (r.status_code, r.text)

    body = {"prompt": "def f(x):", "max_tokens": 4}
    first = threading.Thread(target=post, args=("running", {**body, "stream": stream}))
    first.start()
    while httpx.get(f"{base}/health").json()["running"] < 1:
        time.sleep(0.02)
    second = threading.Thread(target=post, args=("queued", {**body, "stream": not stream}))
    second.start()
    while httpx.get(f"{base}/health").json()["in_flight"] < 2:
        time.sleep(0.02)
    t0 = time.monotonic()
    server.should_exit = True
    thread.join(10)
    first.join(10)
    second.join(10)
    assert time.monotonic() - t0 < 3, "the server outlived its graceful timeout"
    status, text = results["queued"]
    assert status == 503 and json.loads(text)["error"]["code"] == "cancelled", text
    status, text = results["running"]
    if stream:
        assert status == 200 and text.endswith("data: [DONE]\n\n"), text[-300:]
        last = json.loads([ln for ln in text.splitlines() if ln.startswith("data: {")][-1][6:])
        assert last["error"]["code"] == "cancelled", last
    else:
        assert status == 503 and json.loads(text)["error"]["code"] == "cancelled", text
    bad = [r for r in caplog.records if r.exc_info]
    assert not bad, [r.getMessage() for r in bad]


def test_concurrent_merges_match_single_threaded(srv: SimpleNamespace) -> None:
    """16 clients, 512 merge requests: every answer equals the same request's answer alone."""

    def body(i: int) -> dict:
        update = f"# ... existing code ...\n\ndef b():\n    return {100 + i}\n\n# ... existing code ...\n"
        return {"original": ORIG + "\n\ndef c():\n    return 3\n", "update": update, "path": "x.py"}

    variants = 24
    alone = {}
    for i in range(variants):
        r = httpx.post(f"{srv.base}/v1/apply", json=body(i))
        assert r.status_code == 200 and r.json()["engine"] == "merge", r.text
        alone[i] = r.json()["merged"]
    wrong: list[object] = []

    def client(c: int) -> None:
        with httpx.Client(timeout=60) as h:
            for k in range(32):
                i = (c * 7 + k) % variants
                r = h.post(f"{srv.base}/v1/apply", json=body(i))
                while r.status_code == 503:  # the queue (4) is full: back off and retry
                    assert r.json()["error"]["code"] == "server_overloaded", r.text
                    time.sleep(0.01)
                    r = h.post(f"{srv.base}/v1/apply", json=body(i))
                if r.status_code != 200 or r.json()["merged"] != alone[i]:
                    wrong.append((i, r.status_code, r.text[:200]))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not wrong, wrong[:5]
    _healthy(srv)

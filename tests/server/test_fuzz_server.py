"""Fuzz the server's request parsing with hypothesis: structured near-valid requests and raw bytes.

A few seconds by default; longer: `EDGE_SPEC_FUZZ_EXAMPLES=20000 python -m pytest
tests/server/test_fuzz_server.py -q`, coverage-guided: `python tests/fuzz/atheris_server.py`.
"""

from __future__ import annotations

import os

import pytest
from conftest import load_fuzz

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

fs = load_fuzz("fuzz_server")
_ENV = os.environ.get("EDGE_SPEC_FUZZ_EXAMPLES")
FUZZ = settings(
    max_examples=int(_ENV) if _ENV else 150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def client():  # noqa: ANN201
    c = fs.make_client()
    yield c
    c.__exit__(None, None, None)


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
TEXT = st.text(max_size=60)  # includes lone surrogates, NUL, U+FFFD
MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "system", "assistant", "bot", ""]),
        "content": st.one_of(
            TEXT,
            st.none(),
            st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}), max_size=2),
            JSON,
        ),
    }
)
NAN = st.sampled_from([float("nan"), float("inf"), -float("inf")])
COMMON = {
    "max_tokens": st.one_of(st.integers(-3, 40), JSON),
    "temperature": st.one_of(st.floats(-1, 3), NAN, JSON),
    "top_p": st.one_of(st.floats(-0.5, 1.5), NAN),
    "top_k": st.integers(-2, 50),
    "seed": st.one_of(st.integers(-(2**64), 2**64), JSON),
    "stop": st.one_of(TEXT, st.lists(TEXT, max_size=3), JSON),
    "stream": st.booleans(),
    "n": st.integers(0, 3),
    "prediction": st.one_of(
        st.fixed_dictionaries({"type": st.just("content"), "content": TEXT}), JSON
    ),
    "model": st.one_of(TEXT, JSON),
}
CHAT = st.fixed_dictionaries(
    {"messages": st.one_of(st.lists(MESSAGE, max_size=3), JSON)}, optional=COMMON
)
COMPLETION = st.fixed_dictionaries(
    {"prompt": st.one_of(TEXT, st.lists(TEXT, max_size=2), JSON)},
    optional={**COMMON, "echo": st.booleans()},
)
APPLY = st.fixed_dictionaries(
    {"original": st.one_of(TEXT, JSON), "update": st.one_of(TEXT, JSON)},
    optional={
        "instruction": st.one_of(TEXT, JSON),
        "stream": st.booleans(),
        "max_tokens": st.integers(-1, 40),
        "template": st.one_of(st.sampled_from(["instruct", "fastapply", "nope"]), JSON),
        "lang": TEXT,
    },
)


@FUZZ
@given(path=st.sampled_from(fs.ENDPOINTS), obj=st.one_of(CHAT, COMPLETION, APPLY, JSON))
@example(path="/v1/completions", obj={"prompt": "x", "max_tokens": 10**30})
@example(path="/v1/chat/completions", obj={"messages": [{"role": "user", "content": "\ud800"}]})
@example(path="/v1/apply", obj={"original": "a" * 5000, "update": "b"})
@example(
    path="/v1/chat/completions", obj={"messages": [{"role": "user", "content": "x"}], "seed": -1}
)
def test_structured_requests(client, path: str, obj: object) -> None:  # noqa: ANN001
    body = fs.body_from(obj)
    fs.check_request(client, path, body, {})


@FUZZ
@given(path=st.sampled_from(fs.ENDPOINTS), body=st.binary(max_size=300))
@example(path="/v1/completions", body=b'{"prompt": "\xff\xfe"}')
@example(path="/v1/completions", body=b"[1, 2]")
@example(path="/v1/completions", body=b'{"prompt": "x"' + b" " * 5000 + b"}")
def test_raw_bodies(client, path: str, body: bytes) -> None:  # noqa: ANN001
    fs.check_request(client, path, body, {})

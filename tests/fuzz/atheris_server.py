"""Coverage-guided fuzzing (atheris / libFuzzer) of the server's request parsing, for runs
longer than CI's hypothesis budget (tests/server/test_fuzz_server.py).

    pip install atheris            # or: pip install 'edge-spec[fuzz]'
    python tests/fuzz/atheris_server.py -max_total_time=600 /tmp/server_corpus
    python tests/fuzz/atheris_server.py -runs=2000          # no corpus folder: a smoke run

The first input byte picks the endpoint, the rest is the request body. An empty corpus folder is
seeded with valid requests so mutations start near the parser's interesting paths. A crash
(a 500, a malformed answer) is written to ./crash-*; replay it with
`python tests/fuzz/atheris_server.py ./crash-<hash>` and add it as an @example.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for edge_spec
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fastapi  # noqa: E402,F401 - the framework is not what we fuzz: import before instrumenting
import starlette.testclient  # noqa: E402,F401

with atheris.instrument_imports(include=["edge_spec", "fuzz_server"]):
    import fuzz_server

SEEDS = [
    {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": True},
    {"prompt": "def f(", "max_tokens": 8, "stop": ["\n"], "temperature": 0.5, "seed": 1},
    {"original": "a = 1\n", "update": "a = 2\n", "instruction": "set a", "max_tokens": 16},
    {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
        "prediction": {"type": "content", "content": "x = 1"},
    },
]
CLIENT = None


def one_request(data: bytes) -> None:
    global CLIENT
    if CLIENT is None:
        CLIENT = fuzz_server.make_client()
    if not data:
        return
    path = fuzz_server.ENDPOINTS[data[0] % len(fuzz_server.ENDPOINTS)]
    fuzz_server.check_request(CLIENT, path, data[1:], {})


def _seed(folder: Path) -> None:
    if folder.is_dir() and not any(folder.iterdir()):
        for i, obj in enumerate(SEEDS):
            (folder / f"seed{i}").write_bytes(bytes([i % 3]) + json.dumps(obj).encode())


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        if not arg.startswith("-"):
            _seed(Path(arg))
    atheris.Setup(sys.argv, one_request)
    atheris.Fuzz()

"""llama.cpp's own `llama-server` as a bench peer: same GGUF, same prompt tokens, greedy.

Modes `llama-server` (its plain decoding, the baseline of the others), `llama-server-ngram-simple`,
`llama-server-ngram-mod` and `llama-server-draft` (the drafter model with `-md`). The binary comes
from `--llama-server PATH` or `$LLAMA_SERVER` (build it from the llama.cpp that llama-cpp-python
ships: README, "Benchmarks"); without one these modes are skipped with a clear line. One server
process per mode, started on first use, on 127.0.0.1, kept for the whole run. Decode speed comes
from the server's own timings (`predicted_n` / `predicted_ms`), prefill from `prompt_ms`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edge_spec.errors import UserError

SPEC_ARGS: dict[str, list[str]] = {
    "llama-server": [],
    "llama-server-ngram-simple": ["--spec-type", "ngram-simple"],
    "llama-server-ngram-mod": ["--spec-type", "ngram-mod"],
    "llama-server-draft": ["--spec-type", "draft-simple"],
}
START_TIMEOUT_S = 180.0


def server_binary(given: str | None) -> Path | None:
    """The llama-server binary from the option or $LLAMA_SERVER (None if neither names one)."""
    path = given or os.environ.get("LLAMA_SERVER")
    if not path:
        return None
    p = Path(path).expanduser()
    if not (p.is_file() and os.access(p, os.X_OK)):
        raise UserError(f"llama-server binary not found or not executable: {p}")
    return p


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServerPeer:
    """One running llama-server per mode; `run` decodes a prompt greedily and times it."""

    def __init__(
        self, binary: Path, model: Path, n_ctx: int, threads: int, drafter: Path | None = None
    ) -> None:
        self.binary, self.model, self.n_ctx, self.threads = binary, model, n_ctx, threads
        self.drafter = drafter
        self._procs: dict[str, tuple[subprocess.Popen[bytes], int]] = {}

    def _start(self, mode: str) -> int:
        if mode in self._procs:
            return self._procs[mode][1]
        extra = list(SPEC_ARGS[mode])
        if mode == "llama-server-draft":
            if self.drafter is None:
                raise UserError("llama-server-draft needs a drafter model (--drafter)")
            extra += ["-md", str(self.drafter)]
        port = _free_port()
        cmd = [
            str(self.binary),
            "-m",
            str(self.model),
            "-c",
            str(self.n_ctx),
            "-np",
            "1",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-ui",
            *extra,
        ]
        if self.threads:
            cmd += ["-t", str(self.threads), "-tb", str(self.threads)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._procs[mode] = (proc, port)
        self._wait(proc, port)
        return port

    @staticmethod
    def _wait(proc: subprocess.Popen[bytes], port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise UserError(f"llama-server exited with code {proc.returncode} at start")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        raise UserError("llama-server did not become healthy in time")

    def run(
        self, mode: str, tokens: Sequence[int], max_tokens: int, stop: Sequence[str]
    ) -> dict[str, Any]:
        """Greedy decoding of `tokens` (our exact prompt) with the mode's server."""
        port = self._start(mode)
        body = {
            "prompt": [int(t) for t in tokens],
            "n_predict": max_tokens,
            "temperature": 0.0,
            "top_k": 1,
            "stop": list(stop),
            "cache_prompt": False,
            "stream": False,
        }
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/completion",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=3600) as r:
            d = json.loads(r.read())
        t = d.get("timings", {})
        n_out, ms = int(t.get("predicted_n", 0)), float(t.get("predicted_ms", 0.0))
        drafted, accepted = t.get("draft_n"), t.get("draft_n_accepted")
        finish = {"word": "stop", "limit": "length"}.get(d.get("stop_type", ""), "eos")
        return {
            "text": d.get("content", ""),
            "output_tokens": n_out,
            "prefill_ms": float(t.get("prompt_ms", 0.0)),
            "decode_ms": ms,
            "decode_tok_s": n_out / (ms / 1e3) if ms else 0.0,
            "tokens_per_forward": None,
            "acceptance": (accepted / drafted) if drafted else None,
            "drafted": drafted,
            "accepted": accepted,
            "finish_reason": finish,
            "baseline": "llama-server",
        }

    def close(self) -> None:
        for proc, _port in self._procs.values():
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        self._procs.clear()

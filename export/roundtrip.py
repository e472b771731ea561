"""Round-trip check of an exported model against its source on a fixed code prompt.

The source model continues the prompt greedily for `n` tokens; both models then evaluate the
prompt plus that continuation in one batch. Agreement is the share of the `n` positions where the
exported model's argmax equals the source's greedy token (teacher-forced, so one early miss does
not misalign the rest); `first_divergence` is where greedy decoding of the two would part.

`roundtrip(exported_rt, source_rt)` returns e.g. `agreement` 1.0 and `max_logit_diff` 0.31.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_spec.core.chat import text_tokens
from edge_spec.runtimes import RuntimeOptions, open_runtime

CHECK_PROMPT = (
    "def merge_sorted(a: list[int], b: list[int]) -> list[int]:\n"
    '    """Merge two sorted lists into one sorted list."""\n'
    "    result = []\n"
)
CHECK_TOKENS = 32
CHECK_CTX = 512


@dataclass(frozen=True)
class RoundTrip:
    """Agreement of an exported model with its source over `tokens` greedy positions."""

    tokens: int
    agreement: float
    first_divergence: int  # -1: none
    max_logit_diff: float


def roundtrip(
    exported: Any, source: Any, n: int = CHECK_TOKENS, prompt: str = CHECK_PROMPT
) -> RoundTrip:
    """Compare two Runtimes that share a vocabulary (their KV caches are reset)."""
    source.truncate(0)
    ids = text_tokens(source, prompt)
    cont: list[int] = []
    logits = source.eval(ids)
    while True:
        cont.append(int(np.argmax(logits[-1])))
        if len(cont) == n:
            break
        logits = source.eval(cont[-1:])
    seq = ids + cont[:-1]
    rows = list(range(len(ids) - 1, len(seq)))
    ref = _batch(source, seq, rows)
    out = _batch(exported, seq, rows)
    width = min(ref.shape[1], out.shape[1])  # padded vocabularies may differ in length
    hits = np.argmax(out[:, :width], axis=1) == np.asarray(cont)
    misses = np.flatnonzero(~hits)
    return RoundTrip(
        tokens=n,
        agreement=float(hits.mean()),
        first_divergence=int(misses[0]) if misses.size else -1,
        max_logit_diff=float(np.max(np.abs(ref[:, :width] - out[:, :width]))),
    )


def _batch(rt: Any, seq: list[int], rows: list[int]) -> np.ndarray:
    rt.truncate(0)
    out = np.array(rt.eval(seq, rows=rows), dtype=np.float32, copy=True)
    rt.truncate(0)
    return out


def open_for_check(path: str | os.PathLike[str], backend: str, threads: int = 0) -> Any:
    """A small-context runtime for the check: llamacpp (GGUF), torch (HF folder), ort (ONNX)."""
    opts = RuntimeOptions(n_ctx=CHECK_CTX, n_batch=CHECK_CTX, threads=threads, dtype="float32")
    return open_runtime(backend, Path(path), opts)

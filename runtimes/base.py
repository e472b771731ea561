"""The `Runtime` protocol every backend implements, and helpers shared by backends."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class VocabInfo:
    """What pairing needs to know about a tokenizer (DESIGN.md section 7)."""

    size: int
    vocab_type: str
    bos_id: int | None
    eos_id: int | None
    eog_ids: frozenset[int]
    fingerprint: str
    token_text: tuple[str, ...] = field(repr=False, default=())


@dataclass(frozen=True)
class RuntimeOptions:
    """Backend-neutral settings for opening a model; each backend reads what applies to it."""

    n_ctx: int = 8192
    n_batch: int = 512
    n_threads: int = 0  # 0: all cores
    n_gpu_layers: int = 0  # llama.cpp offload; for ort/torch, non-zero means "use the GPU"
    onnx_provider: str = "CPUExecutionProvider"
    dtype: str = "auto"  # torch: auto (fp32 on CPU, bf16/fp16 on CUDA), float32, float16, bfloat16


@runtime_checkable
class Runtime(Protocol):
    """A model with a KV cache that grows by `eval` and shrinks by `truncate`.

    >>> rt.eval([1, 2, 3], rows=[2]).shape   # logits for the last of the 3 tokens
    (1, rt.n_vocab)
    """

    name: str
    n_vocab: int
    n_ctx: int

    @property
    def n_tokens(self) -> int: ...

    @property
    def tokens(self) -> list[int]:
        """The token ids currently held in the KV cache, in order."""
        ...

    def eval(self, tokens: Sequence[int], rows: Sequence[int] | None = None) -> np.ndarray:
        """Append `tokens` after the KV state; return float32 logits `[len(rows), n_vocab]`.

        `rows` index into `tokens` (default: the last one only; `[]` for none). The array may be
        a view into backend memory that the next `eval` overwrites: copy what you keep.
        """
        ...

    def truncate(self, n: int) -> None:
        """Keep only the first `n` tokens of the KV cache."""
        ...

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = True) -> list[int]: ...

    def token_bytes(self, token: int) -> bytes:
        """The bytes a token contributes to output text (empty for control tokens)."""
        ...

    def detokenize(self, tokens: Sequence[int]) -> str: ...

    @property
    def vocab(self) -> VocabInfo: ...

    @property
    def chat_template(self) -> str | None: ...

    def is_eog(self, token: int) -> bool: ...


def wanted_rows(rt: Runtime, n: int, rows: Sequence[int] | None) -> list[int]:
    """Check that `n` more tokens fit the context; return the logits rows asked for, sorted."""
    if rt.n_tokens + n > rt.n_ctx:
        from edge_spec.errors import UserError

        raise UserError(f"context full: {rt.n_tokens} + {n} tokens exceed n_ctx "
                        f"{rt.n_ctx}; raise n_ctx or shorten the input")
    return [n - 1] if rows is None else sorted(rows)


def fingerprint(token_text: Sequence[str], bos: int | None, eos: int | None) -> str:
    """A short hash over token texts and special ids, equal for tokenizers that pair."""
    h = hashlib.sha256()
    h.update(f"{bos}|{eos}|{len(token_text)}|".encode())
    for t in token_text:
        h.update(t.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def sync_prefix(rt: Runtime, tokens: Sequence[int]) -> int:
    """Roll the KV cache back to its common prefix with `tokens`; return that length."""
    keep = common_prefix(rt.tokens, tokens)
    if keep < rt.n_tokens:
        rt.truncate(keep)
    return keep

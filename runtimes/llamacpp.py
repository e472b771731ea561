"""llama.cpp runtime on llama-cpp-python's low-level batch API.

Logits are produced only for the rows asked for and returned as a zero-copy view of
llama.cpp's output buffer, so a verify step never copies the vocabulary matrix.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from edge_spec.errors import UserError, require
from edge_spec.runtimes.base import (
    ArgmaxPool,
    Banned,
    RuntimeOptions,
    VocabInfo,
    chunked_eval,
    fingerprint,
    host_greedy,
)
from edge_spec.store.validate import check_gguf

_VOCAB_TYPES = {0: "none", 1: "spm", 2: "bpe", 3: "wpm", 4: "ugm", 5: "rwkv", 6: "plamo2"}


def open_runtime(path: str | os.PathLike[str], options: RuntimeOptions) -> LlamaCppRuntime:
    """Open a GGUF file (the registry entry point, see `edge_spec.runtimes`)."""
    return LlamaCppRuntime(path, options)


class LlamaCppRuntime:
    """A GGUF model in llama.cpp with one sequence whose KV cache we grow and cut."""

    def __init__(self, path: str | os.PathLike[str], config: RuntimeOptions | None = None) -> None:
        llama_cpp = require("llama_cpp", "llamacpp")
        self._lib = llama_cpp.llama_cpp if hasattr(llama_cpp, "llama_cpp") else llama_cpp
        cfg = config or RuntimeOptions()
        path = Path(path)
        check_gguf(path)
        threads = cfg.threads or max(1, os.cpu_count() or 1)
        try:
            self._llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=cfg.n_ctx,
                n_batch=cfg.n_batch,
                n_ubatch=cfg.n_batch,
                n_threads=threads,
                n_threads_batch=threads,
                n_gpu_layers=cfg.n_gpu_layers,
                flash_attn=cfg.flash_attn,
                use_mmap=cfg.mmap,
                logits_all=False,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise UserError(
                f"{path}: llama.cpp could not load this model ({exc}); "
                "check that it is a complete GGUF file"
            ) from exc
        self.name = path.stem
        self.path = path
        self.config = cfg
        self.n_ctx = self._llm.n_ctx()
        self._ctx = self._llm.ctx
        self._vocab_p = self._lib.llama_model_get_vocab(self._llm.model)
        self.n_vocab = self._lib.llama_vocab_n_tokens(self._vocab_p)
        # llama.cpp may clamp n_batch (e.g. to n_ctx); chunk by what it actually accepts.
        self.n_batch = int(self._lib.llama_n_batch(self._ctx))
        self._batch = self._lib.llama_batch_init(self.n_batch, 0, 1)
        self._mem = self._lib.llama_get_memory(self._ctx)
        self._tokens: list[int] = []
        self._argmax = ArgmaxPool(threads)  # llama.cpp's threads are idle between decodes
        self._pieces: list[bytes] | None = None
        self._vocab: VocabInfo | None = None
        self._eog = frozenset(
            t for t in range(self.n_vocab) if self._lib.llama_vocab_is_eog(self._vocab_p, t)
        )
        self._lib.llama_memory_clear(self._mem, True)

    def close(self) -> None:
        """Free the batch and the model now (idempotent); the runtime is unusable after."""
        batch = getattr(self, "_batch", None)
        if batch is not None:
            self._batch = None
            self._lib.llama_batch_free(batch)
        argmax = getattr(self, "_argmax", None)
        if argmax is not None:
            argmax.close()
        llm = getattr(self, "_llm", None)
        if llm is not None:
            llm.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001  at interpreter exit the bindings may be gone already
            pass

    @property
    def n_tokens(self) -> int:
        return len(self._tokens)

    @property
    def tokens(self) -> list[int]:
        return self._tokens

    @property
    def metadata(self) -> dict[str, str]:
        return dict(self._llm.metadata)

    @property
    def chat_template(self) -> str | None:
        return self._llm.metadata.get("tokenizer.chat_template")

    def eval(self, tokens: Sequence[int], rows: Sequence[int] | None = None) -> np.ndarray:
        return chunked_eval(self, tokens, rows, self._step)

    def _step(self, chunk: list[int], rows: list[int], last: bool) -> np.ndarray | None:
        self._decode(chunk, rows)
        if not rows:
            return None
        ptr = self._lib.llama_get_logits(self._ctx)
        view = np.ctypeslib.as_array(ptr, shape=(len(rows), self.n_vocab))
        # A later chunk overwrites the buffer, so only the last chunk may stay a view.
        return view if last else view.copy()

    def _decode(self, chunk: list[int], logit_rows: Sequence[int]) -> None:
        b = self._batch
        n_past = self.n_tokens
        flags = set(logit_rows)
        for i, tok in enumerate(chunk):
            b.token[i] = tok
            b.pos[i] = n_past + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = i in flags
        b.n_tokens = len(chunk)
        rc = self._lib.llama_decode(self._ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed with code {rc} at n_past={n_past}")
        self._tokens.extend(chunk)  # chunked_eval made them Python ints already

    def greedy(self, tokens: Sequence[int], banned: Banned = None) -> list[int]:
        return host_greedy(
            self.eval(tokens, rows=range(len(tokens))), tokens[1:], banned, self._argmax
        )

    def truncate(self, n: int) -> None:
        if n < 0 or n > self.n_tokens:
            raise ValueError(f"truncate({n}) outside 0..{self.n_tokens}")
        if n < self.n_tokens:
            if not self._lib.llama_memory_seq_rm(self._mem, 0, n, -1):
                raise RuntimeError("llama.cpp refused to remove KV entries")
            del self._tokens[n:]

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = True) -> list[int]:
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special))

    def _piece_table(self) -> list[bytes]:
        if self._pieces is None:
            buf = ctypes.create_string_buffer(256)
            pieces = []
            for t in range(self.n_vocab):
                n = self._lib.llama_token_to_piece(self._vocab_p, t, buf, 256, 0, False)
                pieces.append(buf.raw[:n] if n > 0 else b"")
            self._pieces = pieces
        return self._pieces

    def token_bytes(self, token: int) -> bytes:
        return self._piece_table()[token]

    def detokenize(self, tokens: Sequence[int]) -> str:
        table = self._piece_table()
        return b"".join(table[t] for t in tokens).decode("utf-8", errors="replace")

    def is_eog(self, token: int) -> bool:
        return token in self._eog

    @property
    def bos_id(self) -> int | None:
        bos = self._lib.llama_vocab_bos(self._vocab_p)
        return None if bos < 0 else int(bos)

    @property
    def add_bos(self) -> bool:
        return bool(self._lib.llama_vocab_get_add_bos(self._vocab_p))

    @property
    def vocab(self) -> VocabInfo:
        if self._vocab is None:
            texts = tuple(
                (self._lib.llama_vocab_get_text(self._vocab_p, t) or b"").decode("utf-8", "replace")
                for t in range(self.n_vocab)
            )
            eos = int(self._lib.llama_vocab_eos(self._vocab_p))
            vtype = _VOCAB_TYPES.get(self._lib.llama_vocab_type(self._vocab_p), "unknown")
            self._vocab = VocabInfo(
                size=self.n_vocab,
                vocab_type=vtype,
                bos_id=self.bos_id,
                eos_id=None if eos < 0 else eos,
                eog_ids=self._eog,
                fingerprint=fingerprint(texts, self.bos_id, eos),
                token_text=texts,
            )
        return self._vocab

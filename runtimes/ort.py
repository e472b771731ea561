"""ONNX Runtime backend for exported decoder folders (onnxruntime-genai builder or optimum layout).

Two decoders sit behind one `OrtRuntime` (both in `edge_spec.runtimes.ort_session`):

- `session` (default): a plain `onnxruntime.InferenceSession` with IO binding. For the builder's
  GroupQueryAttention graphs (`past_present_share_buffer` in genai_config.json) each layer's K/V
  lives in one n_ctx-long buffer bound as both past input and present output, so a step appends
  in place and `truncate` only moves the length: no KV copies at all, and on CUDA the cache stays
  on the device. Other graphs (optimum) get the past back as `present.*` and slice it. Logits go
  into one reused host buffer, and a prefill chunk projects only one row to the vocabulary.
  `greedy` reads the graph's own argmax output (`edge_spec.runtimes.ort_graph`), banned ids
  masked inside the graph: one id per row crosses to the host, and on CUDA the logits stay in a
  device buffer. Same logits, same first-index tie rule as numpy: the ids equal host argmax.
- `genai`: onnxruntime-genai's `Generator` (`append_tokens`, `get_output("logits")`, `rewind_to`).

Measured on the 2-core CPU (SmolLM2 int8, Qwen 0.5B int4): both give bit-identical logits and
the same per-token decode and verify cost within noise; the session decoder prefills ~25% faster
(no lm_head on prefill rows), does not spin its threads (a 2x loss under contention, which genai
does not let us turn off), needs no genai_config.json, and does not import onnxruntime-genai.

Example: `rt = OrtRuntime("exports/smollm2-onnx-int8", RuntimeOptions(n_ctx=4096, threads=2))`
Example: `rt.eval(rt.tokenize("def f():"), rows=[0, 1]).shape`
(2, 49152)
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from edge_spec.errors import UserError, require
from edge_spec.runtimes.base import (
    ArgmaxPool,
    Banned,
    RuntimeOptions,
    VocabInfo,
    chunked_eval,
    has_only,
    host_greedy,
    wanted_rows,
)
from edge_spec.runtimes.ort_session import GenaiDecoder, ModelInfo, SessionDecoder
from edge_spec.runtimes.tokjson import JsonTokenizer
from edge_spec.store.checkpoint import check_onnx_dir

DECODERS = ("session", "genai")


def open_runtime(path: str | os.PathLike[str], options: RuntimeOptions) -> OrtRuntime:
    """Open an exported ONNX folder (the registry entry point, see `edge_spec.runtimes`)."""
    return OrtRuntime(path, options)


class OrtRuntime:
    """An exported ONNX decoder with one sequence whose KV cache we grow and cut."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        options: RuntimeOptions | None = None,
        decoder: str = "session",
        share_buffer: bool | None = None,
        spin: bool | None = None,
    ) -> None:
        opts = options or RuntimeOptions()
        folder = check_onnx_dir(path)
        if decoder not in DECODERS:
            raise UserError(f"unknown ONNX decoder {decoder!r}: use one of {', '.join(DECODERS)}")
        info = ModelInfo(folder)
        self.name = folder.resolve().name
        self.path = folder
        self.n_ctx = min(opts.n_ctx, info.context) if info.context else opts.n_ctx
        self.n_batch = max(1, opts.n_batch)
        self.provider = _provider(opts)
        if decoder == "genai":
            self._dec: SessionDecoder | GenaiDecoder = GenaiDecoder(
                folder, info, self.n_ctx, opts.threads, self.provider
            )
        else:
            shared = info.shared if share_buffer is None else share_buffer
            # Spinning pays only without worker threads to starve (see _session_options).
            spin = opts.threads == 1 if spin is None else spin
            self._dec = SessionDecoder(info, self.n_ctx, opts.threads, self.provider, shared, spin)
        self.decoder = decoder
        self.n_vocab = self._dec.n_vocab or info.vocab_size
        self._tok = JsonTokenizer(folder, self.n_vocab)
        self._tokens: list[int] = []
        self._argmax = ArgmaxPool(opts.threads or os.cpu_count() or 1)

    @property
    def n_tokens(self) -> int:
        return len(self._tokens)

    @property
    def tokens(self) -> list[int]:
        return self._tokens

    def eval(self, tokens: Sequence[int], rows: Sequence[int] | None = None) -> np.ndarray:
        return chunked_eval(self, tokens, rows, self._step)

    def _step(self, chunk: list[int], rows: list[int], last: bool) -> np.ndarray | None:
        logits = self._dec.forward(chunk, self.n_tokens, bool(rows))
        self._tokens.extend(chunk)
        return _take(logits, rows, last) if rows else None

    def greedy(self, tokens: Sequence[int], banned: Banned = None) -> list[int]:
        """Greedy verification with the graph's argmax: only one id per row crosses to the host
        (on CUDA the logits stay on the device). Host argmax on an unedited graph or genai, past
        n_batch, where the rows span several forwards, and under an allow-list mask (`Only`),
        whose ban list would be nearly the whole vocabulary."""
        n, dec = len(tokens), self._dec
        if (
            not n
            or n > self.n_batch
            or not isinstance(dec, SessionDecoder)
            or not dec.device_argmax
            or has_only(banned)
        ):
            return host_greedy(self.eval(tokens, rows=range(n)), tokens[1:], banned, self._argmax)
        wanted_rows(self, n, range(n))
        chunk = [int(t) for t in tokens]
        ids = dec.forward_ids(chunk, self.n_tokens, banned).tolist()
        self._tokens.extend(chunk)
        out: list[int] = []
        for i, best in enumerate(ids):
            out.append(int(best))
            if i == n - 1 or best != chunk[i + 1]:
                break
        return out

    def truncate(self, n: int) -> None:
        if n < 0 or n > self.n_tokens:
            raise ValueError(f"truncate({n}) outside 0..{self.n_tokens}")
        if n < self.n_tokens:
            self._dec.rewind(n)
            del self._tokens[n:]

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = True) -> list[int]:
        return self._tok.tokenize(text, add_bos=add_bos, special=special)

    def token_bytes(self, token: int) -> bytes:
        return self._tok.pieces()[token]

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self._tok.detokenize(tokens)

    def is_eog(self, token: int) -> bool:
        return token in self._tok.eog_ids

    @property
    def bos_id(self) -> int | None:
        return self._tok.bos_id

    @property
    def add_bos(self) -> bool:
        return self._tok.add_bos

    @property
    def chat_template(self) -> str | None:
        return self._tok.chat_template

    @property
    def metadata(self) -> dict[str, str]:
        """An exported ONNX folder carries no GGUF-style metadata; its name stands in."""
        return {"general.name": self.name}

    @property
    def vocab(self) -> VocabInfo:
        return self._tok.vocab


def _take(logits: np.ndarray, rows: list[int], last: bool) -> np.ndarray:
    """float32 rows of a step's logits; a view when contiguous and nothing overwrites it first."""
    if rows == list(range(rows[0], rows[-1] + 1)):
        part = logits[rows[0] : rows[-1] + 1]
    else:
        part = logits[rows]
    if part.dtype != np.float32:
        return part.astype(np.float32)
    # A later chunk reuses the decoder's buffer, so only the last chunk may stay a view.
    return part if last or part.base is None else part.copy()


def _provider(opts: RuntimeOptions) -> str:
    """The execution provider to use; a GPU request without onnxruntime-gpu is a UserError."""
    ort = require("onnxruntime", "onnx")
    want = opts.onnx_provider or "CPUExecutionProvider"
    if opts.n_gpu_layers and want == "CPUExecutionProvider":
        want = "CUDAExecutionProvider"
    if want not in ort.get_available_providers():
        raise UserError(
            f"ONNX Runtime here has no {want} (it has "
            f"{', '.join(ort.get_available_providers())}); for CUDA install "
            "'edge-spec[onnx-gpu]' in an environment without 'edge-spec[onnx]'"
        )
    return want

"""The two decoders behind `OrtRuntime`: an InferenceSession with IO binding, and genai's Generator.

Both take a chunk of token ids after `n_past` cached tokens and return that chunk's logits rows;
`rewind(n)` cuts the cache. The session decoder can also return only each row's argmax
(`forward_ids`, with the graph's `edge_spec_argmax` output) for greedy verification. See
`edge_spec.runtimes.ort` for the choice between them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from edge_spec.errors import UserError, require
from edge_spec.runtimes.base import Banned
from edge_spec.runtimes.ort_graph import ARGMAX, ROWS_INPUT, Edits, ban_feeds, edited_graph
from edge_spec.runtimes.tokjson import read_json

_NP_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
}


class ModelInfo:
    """What the folder's configs say: the decoder file, context length, shapes, KV layout."""

    def __init__(self, folder: Path) -> None:
        genai = read_json(folder / "genai_config.json")
        self.genai = bool(genai)
        model = genai.get("model", {})
        dec = model.get("decoder", {})
        cfg = read_json(folder / "config.json")
        name = dec.get("filename") or ("model.onnx" if (folder / "model.onnx").is_file() else None)
        if name is None:
            found = sorted(p.name for p in folder.glob("*.onnx"))
            name = found[0] if len(found) == 1 else None
        if not name:
            raise UserError(
                f"{folder}: cannot tell which .onnx file is the decoder "
                "(no genai_config.json and not exactly one model file)"
            )
        self.file = (folder / name).resolve()
        if not self.file.is_relative_to(folder.resolve()) or not self.file.is_file():
            raise UserError(f"{folder}: decoder file {name!r} is missing or outside the folder")
        self.context = int(model.get("context_length") or cfg.get("max_position_embeddings") or 0)
        self.vocab_size = int(model.get("vocab_size") or cfg.get("vocab_size") or 0)
        heads = dec.get("num_attention_heads") or cfg.get("num_attention_heads") or 0
        hidden = dec.get("hidden_size") or cfg.get("hidden_size") or 0
        self.head_size = int(
            dec.get("head_size") or cfg.get("head_dim") or (hidden // heads if heads else 0)
        )
        self.kv_heads = int(
            dec.get("num_key_value_heads") or cfg.get("num_key_value_heads") or heads or 0
        )
        self.shared = bool(genai.get("search", {}).get("past_present_share_buffer", False))


def _session_options(ort: Any, threads: int, spin: bool = False) -> Any:
    so = ort.SessionOptions()
    # Spinning worker threads wait hot between runs; with the drafter and the loop's Python
    # running between runs, or anything else on the cores, they steal its CPU, so decoding is
    # much slower with spinning on a loaded 2-core machine (docs/runtimes.md); with one thread
    # spinning helps a little.
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    so.intra_op_num_threads = max(0, threads)  # 0: ONNX Runtime's default, all physical cores
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3  # warnings about unused initializers etc. are not the user's business
    return so


def _load_session(
    ort: Any, file: Path, threads: int, spin: bool, providers: list[str]
) -> tuple[Any, Edits]:
    """The decoder session, with the graph edits (`edge_spec.runtimes.ort_graph`) it allows."""
    so = _session_options(ort, threads, spin)
    edited = edited_graph(file)
    if edited is not None:
        # The graph is loaded from memory: point ONNX Runtime at the (checked) folder for the
        # external data, as it would resolve it next to the file.
        so.add_session_config_entry(
            "session.model_external_initializers_file_folder_path", str(file.parent)
        )
        try:
            return ort.InferenceSession(edited[0], so, providers=providers), edited[1]
        except Exception:  # noqa: BLE001 - e.g. an ONNX Runtime without that setting
            pass
    return ort.InferenceSession(str(file), so, providers=providers), Edits()


class SessionDecoder:
    """InferenceSession + IO binding; KV in shared n_ctx buffers, or past/present slicing."""

    def __init__(
        self,
        info: ModelInfo,
        n_ctx: int,
        threads: int,
        provider: str,
        shared: bool,
        spin: bool = False,
    ) -> None:
        self._ort = ort = require("onnxruntime", "onnx")
        providers = list(dict.fromkeys([provider, "CPUExecutionProvider"]))
        try:
            self._s, edits = _load_session(ort, info.file, threads, spin, providers)
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
            msg = " ".join(str(exc).split())[:300]
            raise UserError(
                f"{info.file}: ONNX Runtime could not load this model ({msg})"
            ) from None
        self._rows = edits.rows
        self.device_argmax = edits.argmax  # `forward_ids` works
        self._device = "cuda" if provider == "CUDAExecutionProvider" else "cpu"
        # forward_ids binds logits to device memory (never copied to the host) off the CPU.
        self._logits_on_device = self._device != "cpu"
        ins = {i.name: i for i in self._s.get_inputs()}
        outs = {o.name: o for o in self._s.get_outputs()}
        for need in ("input_ids", "attention_mask"):
            if need not in ins:
                raise UserError(
                    f"{info.file}: no {need!r} input; not a decoder export edge-spec knows"
                )
        self._types = {k: _NP_TYPES.get(v.type, np.float32) for k, v in {**ins, **outs}.items()}
        self._pos = "position_ids" in ins
        self._past = [k for k in ins if k.startswith("past_key_values.")]
        self._present = {k: k.replace("past_key_values.", "present.") for k in self._past}
        if any(p not in outs for p in self._present.values()) or "logits" not in outs:
            raise UserError(
                f"{info.file}: past_key_values.* inputs without matching present.* "
                "and logits outputs; not a decoder export edge-spec knows"
            )
        dim = outs["logits"].shape[-1]
        self.n_vocab = dim if isinstance(dim, int) else info.vocab_size
        shape = ins[self._past[0]].shape if self._past else []
        self._kv_heads = (
            shape[1] if len(shape) == 4 and isinstance(shape[1], int) else info.kv_heads
        )
        self._head = shape[3] if len(shape) == 4 and isinstance(shape[3], int) else info.head_size
        self._io = self._s.io_binding()
        self._shared = shared
        self._logits = np.empty(0, dtype=self._types["logits"])
        self._device_logits: Any = None  # an OrtValue on the device, grown as needed
        self._ids = np.empty(0, dtype=np.int64)
        if shared:
            self._kv = {
                k: ort.OrtValue.ortvalue_from_shape_and_type(
                    [1, self._kv_heads, n_ctx, self._head], self._types[k], self._device, 0
                )
                for k in self._past
            }
            for k, v in self._kv.items():
                self._io.bind_ortvalue_input(k, v)
                self._io.bind_ortvalue_output(self._present[k], v)
        else:
            empty = np.zeros((1, self._kv_heads, 0, self._head))
            self._host = {k: empty.astype(self._types[k]) for k in self._past}

    def _feeds(
        self, chunk: list[int], n_past: int, rows: int, banned: Banned
    ) -> dict[str, np.ndarray]:
        n = len(chunk)
        feeds = {
            "input_ids": np.asarray([chunk], dtype=self._types["input_ids"]),
            "attention_mask": np.ones((1, n_past + n), self._types["attention_mask"]),
        }
        if self._pos:
            feeds["position_ids"] = np.arange(
                n_past, n_past + n, dtype=self._types["position_ids"]
            )[None]
        if self._rows:
            feeds[ROWS_INPUT] = np.arange(n - rows, n, dtype=np.int64)
        if self.device_argmax:
            # Always fed: the graph computes the argmax on every run, also for `forward`.
            feeds.update(ban_feeds(banned, rows, self._types["logits"]))
        return feeds

    def forward(self, chunk: list[int], n_past: int, want: bool) -> np.ndarray:
        """Run one chunk after `n_past` cached tokens; the logits are a view of a reused buffer."""
        n = len(chunk)
        # Without wanted rows (prefill) project one row to the vocabulary, not all n: the
        # lm_head is ~25% of a small model's work. Wanted rows get all n rows, so their numerics
        # never depend on which rows were asked for.
        rows = n if want or not self._rows else 1
        feeds = self._feeds(chunk, n_past, rows, None)
        if not self._shared:
            return self._forward_sliced(feeds, n_past, "logits")
        self._bind(feeds, rows)
        out = self._bind_host_logits(rows)
        self._s.run_with_iobinding(self._io)
        return out[0]

    def forward_ids(self, chunk: list[int], n_past: int, banned: Banned) -> np.ndarray:
        """Like `forward` with every row wanted, but only each row's argmax (int64 `[n]`, after
        masking `banned[i]` out of row i) comes back; needs `device_argmax`."""
        n = len(chunk)
        feeds = self._feeds(chunk, n_past, n, banned)
        if not self._shared:
            return self._forward_sliced(feeds, n_past, ARGMAX)
        self._bind(feeds, n)
        if self._logits_on_device:
            self._bind_device_logits(n)
        else:
            self._bind_host_logits(n)
        self._s.run_with_iobinding(self._io)
        return self._ids[:n].copy()

    def _bind(self, feeds: dict[str, np.ndarray], rows: int) -> None:
        """Bind the inputs, and the argmax output to a reused host buffer."""
        io = self._io
        for name, value in feeds.items():
            io.bind_cpu_input(name, value)
        if self.device_argmax:
            # Bound on every run: a binding left from an earlier run would have its row count.
            if self._ids.size < rows:
                self._ids = np.empty(rows, dtype=np.int64)
            io.bind_output(ARGMAX, "cpu", 0, np.int64, [1, rows], self._ids.ctypes.data)

    def _bind_host_logits(self, rows: int) -> np.ndarray:
        vocab = self.n_vocab
        if self._logits.size < rows * vocab:
            self._logits = np.empty(rows * vocab, dtype=self._types["logits"])
        out = self._logits[: rows * vocab].reshape(1, rows, vocab)
        self._io.bind_output("logits", "cpu", 0, out.dtype, [1, rows, vocab], out.ctypes.data)
        return out

    def _bind_device_logits(self, rows: int) -> None:
        """Logits into a reused buffer on the session's device: only the ids are copied out."""
        vocab, dtype = self.n_vocab, self._types["logits"]
        if self._device_logits is None or self._device_logits.shape()[0] < rows * vocab:
            self._device_logits = self._ort.OrtValue.ortvalue_from_shape_and_type(
                [rows * vocab], dtype, self._device, 0
            )
        self._io.bind_output(
            "logits", self._device, 0, dtype, [1, rows, vocab], self._device_logits.data_ptr()
        )

    def _forward_sliced(self, feeds: dict[str, np.ndarray], n_past: int, first: str) -> np.ndarray:
        """Past in, present out (optimum layout): the kept prefix of each past is fed back.
        Returns output `first` (logits, or the argmax ids) for the one batch row."""
        for k in self._past:
            feeds[k] = np.ascontiguousarray(self._host[k][:, :, :n_past])
        names = [first, *(self._present[k] for k in self._past)]
        got = self._s.run(names, feeds)
        self._host = dict(zip(self._past, got[1:], strict=True))
        return got[0][0]

    def rewind(self, n: int) -> None:
        """Nothing to do: the attention mask's length (shared buffers) or the slice of the kept
        pasts (optimum layout) that the next forward binds is the cache length."""


class GenaiDecoder:
    """onnxruntime-genai's Generator: append_tokens / get_output("logits") / rewind_to."""

    def __init__(
        self, folder: Path, info: ModelInfo, n_ctx: int, threads: int, provider: str
    ) -> None:
        og = require("onnxruntime_genai", "onnx")
        if not info.genai:
            raise UserError(
                f"{folder}: the genai decoder needs genai_config.json (a builder export)"
            )
        cfg = og.Config(str(folder))
        cfg.clear_providers()
        if provider == "CUDAExecutionProvider":
            cfg.append_provider("cuda")
        if threads:
            opts = {"intra_op_num_threads": threads, "inter_op_num_threads": 1}
            cfg.overlay(json.dumps({"model": {"decoder": {"session_options": opts}}}))
        try:
            self._model = og.Model(cfg)
        except Exception as exc:  # noqa: BLE001 - genai raises a bare RuntimeError/Exception
            msg = " ".join(str(exc).split())[:300]
            raise UserError(
                f"{folder}: onnxruntime-genai could not load this model ({msg})"
            ) from None
        params = og.GeneratorParams(self._model)
        params.set_search_options(max_length=n_ctx, batch_size=1)
        self._gen = og.Generator(self._model, params)
        self.n_vocab = info.vocab_size

    def forward(self, chunk: list[int], n_past: int, want: bool) -> np.ndarray | None:
        self._gen.append_tokens(np.asarray(chunk, dtype=np.int32))
        return np.asarray(self._gen.get_output("logits"))[0] if want else None

    def rewind(self, n: int) -> None:
        self._gen.rewind_to(n)

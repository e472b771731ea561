"""transformers/torch runtime: the numeric reference (fp32 on CPU), KV rollback by cache crop.

Logits are computed only for the rows asked for: the base model runs on every token, the
vocabulary projection only on the selected hidden states (`logits_to_keep` with an index tensor).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edge_spec.errors import UserError, require
from edge_spec.runtimes import hf_vocab
from edge_spec.runtimes.base import (
    Banned,
    Only,
    RuntimeOptions,
    VocabInfo,
    chunked_eval,
    fingerprint,
    host_greedy,
    wanted_rows,
)
from edge_spec.runtimes.gguf_torch import load_gguf_model
from edge_spec.runtimes.hf_exact import make_batch_invariant
from edge_spec.store.checkpoint import check_hf_checkpoint

DTYPES = ("float32", "float16", "bfloat16")


def open_runtime(path: str | os.PathLike[str], options: RuntimeOptions) -> TorchRuntime:
    """Open a Hugging Face checkpoint folder or a GGUF file (the registry entry point)."""
    return TorchRuntime(path, options)


def _pick_dtype(torch: Any, options: RuntimeOptions, cuda: bool) -> Any:
    if options.dtype not in ("auto", *DTYPES):
        raise UserError(f"unknown dtype {options.dtype!r}: use auto, {', '.join(DTYPES)}")
    if options.dtype != "auto":
        return getattr(torch, options.dtype)
    if not cuda:
        return torch.float32
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def set_attention(model: Any, name: str) -> None:
    """Switch the model's attention kernels where transformers can after loading.

    Older transformers (before `set_attn_implementation`) pick the kernels at load time, SDPA
    where torch has it, so there is nothing to switch.
    """
    setter = getattr(model, "set_attn_implementation", None)
    if setter is not None:
        setter(name)


def load_model(path: Path, dtype_name: str) -> tuple[Any, Any]:
    """(model, tokenizer), without transformers' progress bars on the user's terminal."""
    bars = require("transformers", "torch").utils.logging
    was_on = bars.is_progress_bar_enabled()
    bars.disable_progress_bar()
    # The GGUF dequantizer uses a bare tqdm that transformers' switch does not reach.
    gguf = importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    bar = getattr(gguf, "tqdm", None)
    if bar is not None:
        gguf.tqdm = functools.partial(bar, disable=True)
    try:
        return _load_model(path, dtype_name)
    finally:
        if bar is not None:
            gguf.tqdm = bar
        if was_on:
            bars.enable_progress_bar()


def _load_model(path: Path, dtype_name: str) -> tuple[Any, Any]:
    """(model, tokenizer) from a GGUF file (dequantized) or a safetensors checkpoint folder."""
    if path.suffix.lower() == ".gguf":
        return load_gguf_model(path, dtype_name)
    torch = require("torch", "torch")
    transformers = require("transformers", "torch")
    folder = check_hf_checkpoint(path)
    try:
        tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(folder),
            dtype=getattr(torch, dtype_name),
            use_safetensors=True,
            local_files_only=True,
        )
    except (ValueError, KeyError, OSError, RuntimeError) as exc:
        msg = " ".join(str(exc).split())[:200]
        raise UserError(f"{folder}: transformers cannot load this checkpoint ({msg})") from exc
    return model, tok


class TorchRuntime:
    """A causal LM in transformers with one sequence whose `DynamicCache` we grow and crop."""

    def __init__(self, path: str | os.PathLike[str], options: RuntimeOptions | None = None) -> None:
        torch = require("torch", "torch")
        self._torch = torch
        opts = options or RuntimeOptions()
        path = Path(path)
        if not path.exists():
            raise UserError(f"model not found: {path}")
        if opts.threads:
            torch.set_num_threads(opts.threads)
        cuda = opts.n_gpu_layers != 0 and torch.cuda.is_available()
        self.device = torch.device("cuda" if cuda else "cpu")
        dtype = _pick_dtype(torch, opts, cuda)
        model, tok = load_model(path, str(dtype).removeprefix("torch."))
        self.model = model.to(device=self.device, dtype=dtype).eval()
        # On CPU, batch-invariant kernels make a verify window's logits equal one-token
        # decoding's bit for bit (runtimes/hf_exact.py); on CUDA, speed: SDPA.
        self.batch_invariant = not cuda and make_batch_invariant(self.model)
        if not self.batch_invariant:
            set_attention(self.model, "sdpa" if cuda else "eager")
        self.tokenizer = tok
        self.name = path.stem if path.is_file() else path.name
        self.path = path
        self.options = opts
        cfg = model.config
        self.n_vocab = int(getattr(cfg, "vocab_size", 0) or len(tok))
        max_pos = int(getattr(cfg, "max_position_embeddings", 0) or opts.n_ctx)
        self.n_ctx = min(opts.n_ctx, max_pos)
        self.n_batch = max(1, opts.n_batch)
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._rows_kw = "logits_to_keep" in params
        self._cache = self._new_cache()
        self._tokens: list[int] = []
        self._texts: tuple[str, ...] | None = None
        self._pieces: list[bytes] | None = None
        self._vocab: VocabInfo | None = None
        self._add_bos: bool | None = None
        self._eog = hf_vocab.eog_ids(tok, model, self.eos_id, self._token_texts())

    def _new_cache(self) -> Any:
        transformers = require("transformers", "torch")
        if "sliding_attention" in (getattr(self.model.config, "layer_types", None) or ()):
            # A sliding-window layer drops old positions and cannot be cropped back; full
            # layers keep them and the attention mask still applies the window.
            return transformers.DynamicCache()
        try:
            return transformers.DynamicCache(config=self.model.config)
        except TypeError:  # transformers < 4.56 takes no config
            return transformers.DynamicCache()

    @property
    def n_tokens(self) -> int:
        return len(self._tokens)

    @property
    def tokens(self) -> list[int]:
        return self._tokens

    @property
    def metadata(self) -> dict[str, str]:
        """GGUF-style names, for picking an apply template by model family."""
        name = getattr(self.model.config, "_model_name_or_path", "") or self.name
        return {
            "general.name": str(name),
            "general.basename": self.name,
            "general.architecture": str(getattr(self.model.config, "model_type", "")),
        }

    @property
    def chat_template(self) -> str | None:
        tpl = getattr(self.tokenizer, "chat_template", None)
        return tpl if isinstance(tpl, str) and tpl else None

    def eval(self, tokens: Sequence[int], rows: Sequence[int] | None = None) -> np.ndarray:
        return chunked_eval(
            self, tokens, rows, lambda chunk, rows, _last: self._forward(chunk, rows)
        )

    def _run(self, chunk: list[int], rows: list[int]) -> Any:
        """One forward; the logits of `rows` as a device tensor (None without rows)."""
        torch = self._torch
        ids = torch.tensor([chunk], dtype=torch.long, device=self.device)
        keep = torch.tensor(rows, dtype=torch.long, device=self.device)
        kw: dict[str, Any] = {self._cache_kw: self._cache, "use_cache": True}
        if self._rows_kw:
            kw["logits_to_keep"] = keep
        with torch.inference_mode():
            res = self.model(input_ids=ids, **kw)
        if (
            self._cache_kw == "past_key_values"
            and getattr(res, "past_key_values", None) is not None
        ):
            self._cache = res.past_key_values
        self._tokens.extend(int(t) for t in chunk)
        if not rows:
            return None
        return res.logits[0] if self._rows_kw else res.logits[0, keep]

    def _forward(self, chunk: list[int], rows: list[int]) -> np.ndarray | None:
        logits = self._run(chunk, rows)
        return None if logits is None else logits.float().cpu().numpy()

    def greedy(self, tokens: Sequence[int], banned: Banned = None) -> list[int]:
        """Greedy verification on the device: only the ids up to the first mismatch cross."""
        n = len(tokens)
        if n > self.n_batch:
            return host_greedy(self.eval(tokens, rows=range(n)), tokens[1:], banned)
        wanted_rows(self, n, range(n))
        torch = self._torch
        with torch.inference_mode():
            logits = self._run([int(t) for t in tokens], list(range(n)))
            for i, ban in enumerate(banned or ()):
                if isinstance(ban, Only):
                    if ban.ids.size:
                        keep = torch.from_numpy(ban.ids).to(self.device)
                        row = logits[i, keep].clone()
                        logits[i] = float("-inf")
                        logits[i, keep] = row
                elif ban.size:
                    logits[i, torch.from_numpy(ban).to(self.device)] = float("-inf")
            best = logits.argmax(dim=-1)
            draft = torch.tensor([int(t) for t in tokens[1:]], dtype=best.dtype, device=best.device)
            miss = (best[:-1] != draft).nonzero()
            m = int(miss[0, 0]) if miss.numel() else n - 1
            return [int(t) for t in best[: m + 1].tolist()]

    def truncate(self, n: int) -> None:
        if n < 0 or n > self.n_tokens:
            raise ValueError(f"truncate({n}) outside 0..{self.n_tokens}")
        if n == self.n_tokens:
            return
        if n == 0:
            self._cache = self._new_cache()
        else:
            # A negative argument removes that many tokens in every transformers version.
            self._cache.crop(n - self.n_tokens)
        del self._tokens[n:]

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = True) -> list[int]:
        # add_bos=True adds BOS only when the model's tokenizer adds one, as llama.cpp does.
        ids = self.tokenizer(
            text, add_special_tokens=add_bos and self.add_bos, split_special_tokens=not special
        )["input_ids"]
        return [int(t) for t in ids]

    def _token_texts(self) -> tuple[str, ...]:
        if self._texts is None:
            self._texts = hf_vocab.token_texts(self.tokenizer, self.n_vocab)
        return self._texts

    def _piece_table(self) -> list[bytes]:
        if self._pieces is None:
            self._pieces = hf_vocab.piece_table(self.tokenizer, self._token_texts())
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
        bos = getattr(self.tokenizer, "bos_token_id", None)
        if bos is None:
            bos = getattr(self.model.config, "bos_token_id", None)
        return None if bos is None else int(bos)

    @property
    def eos_id(self) -> int | None:
        eos = getattr(self.tokenizer, "eos_token_id", None)
        if eos is None:
            eos = getattr(self.model.config, "eos_token_id", None)
            eos = eos[0] if isinstance(eos, list) and eos else eos
        return None if eos is None else int(eos)

    @property
    def add_bos(self) -> bool:
        """Whether the model's tokenizer puts BOS in front of a text by itself."""
        if self._add_bos is None:
            ids = self.tokenizer("a", add_special_tokens=True)["input_ids"]
            self._add_bos = self.bos_id is not None and bool(ids) and int(ids[0]) == self.bos_id
        return self._add_bos

    @property
    def vocab(self) -> VocabInfo:
        if self._vocab is None:
            texts = self._token_texts()
            eos = self.eos_id
            self._vocab = VocabInfo(
                size=self.n_vocab,
                vocab_type=hf_vocab.vocab_type(self.tokenizer),
                bos_id=self.bos_id,
                eos_id=eos,
                eog_ids=self._eog,
                fingerprint=fingerprint(texts, self.bos_id, eos),
                token_text=texts,
            )
        return self._vocab

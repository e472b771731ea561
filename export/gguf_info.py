"""Vocabulary facts of a model file or folder without loading the model (pairing, inspect).

A GGUF's metadata is read with a small parser after `check_gguf` has bounded every length
(gguf's GGUFReader takes ~20 s on a 151k-token vocabulary; this takes well under a second).
Hugging Face and ONNX folders are read from tokenizer.json and the config files.

Example: `gguf_vocab("qwen2.5-coder-0.5b-instruct.gguf").size`
151936
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from collections.abc import Collection
from pathlib import Path
from typing import Any

from edge_spec.errors import UserError
from edge_spec.runtimes.base import VocabInfo, fingerprint
from edge_spec.store.validate import check_gguf

# GGUF value type id -> struct format of the scalar types; 8 is string, 9 is array.
_SCALAR = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
_VOCAB_KEYS = (
    "tokenizer.ggml.model",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id",
)
# tokenizer.ggml.model -> the vocab type name llama.cpp reports (runtimes/llamacpp.py).
_GGUF_VOCAB_TYPES = {
    "gpt2": "bpe",
    "llama": "spm",
    "bert": "wpm",
    "t5": "ugm",
    "rwkv": "rwkv",
    "no_vocab": "none",
}
_HF_VOCAB_TYPES = {"BPE": "bpe", "Unigram": "ugm", "WordPiece": "wpm"}


class _Cursor:
    """Little-endian reads over a buffer whose lengths check_gguf has already bounded."""

    def __init__(self, buf: Any, pos: int) -> None:
        self.buf, self.pos = buf, pos

    def scalar(self, vtype: int) -> Any:
        fmt = _SCALAR[vtype]
        (val,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return val

    def string(self) -> str:
        n = self.scalar(10)
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return raw.decode("utf-8", "replace")

    def value(self, vtype: int, keep: bool) -> Any:
        if vtype in _SCALAR:
            return self.scalar(vtype)
        if vtype == _STRING:
            return self.string()
        etype, count = self.scalar(4), self.scalar(10)
        if etype in _SCALAR and not keep:
            self.pos += count * struct.calcsize(_SCALAR[etype])
            return None
        items = [self.value(etype, keep) for _ in range(count)]
        return items if keep else None


def read_gguf_fields(path: str | os.PathLike[str], keys: Collection[str]) -> dict[str, Any]:
    """The values of metadata `keys` present in GGUF `path`, arrays in full."""
    header = check_gguf(path)  # bounds every length; a bad file is a UserError here
    out: dict[str, Any] = {}
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        cur = _Cursor(buf, 4 + 4 + 8 + 8)
        for _ in range(header.kv_count):
            key = cur.string()
            vtype = cur.scalar(4)
            val = cur.value(vtype, keep=key in keys)
            if key in keys:
                out[key] = val
    return out


def gguf_vocab(path: str | os.PathLike[str]) -> VocabInfo:
    """VocabInfo of a GGUF file, equal to what the llama.cpp runtime reports for it."""
    f = read_gguf_fields(path, _VOCAB_KEYS)
    texts = tuple(f.get("tokenizer.ggml.tokens") or ())
    if not texts:
        raise UserError(f"{path}: the GGUF holds no tokenizer (tokenizer.ggml.tokens)")
    bos = f.get("tokenizer.ggml.bos_token_id")
    eos = f.get("tokenizer.ggml.eos_token_id")
    eog = {f.get(f"tokenizer.ggml.{k}_token_id") for k in ("eos", "eot", "eom")} - {None}
    vtype = _GGUF_VOCAB_TYPES.get(str(f.get("tokenizer.ggml.model")), "unknown")
    # Same fingerprint inputs as LlamaCppRuntime.vocab: bos None when absent, eos -1.
    return VocabInfo(
        size=len(texts),
        vocab_type=vtype,
        bos_id=bos,
        eos_id=eos,
        eog_ids=frozenset(eog),
        fingerprint=fingerprint(texts, bos, -1 if eos is None else eos),
        token_text=texts,
    )


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read it ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object")
    return data


def _first(v: Any) -> int | None:
    if isinstance(v, list):
        v = v[0] if v else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _special_ids(folder: Path) -> tuple[int | None, int | None, int]:
    """(bos, eos, model vocab size) from config.json or an ONNX genai_config.json."""
    if (folder / "config.json").is_file():
        cfg = _json(folder / "config.json")
        return (
            _first(cfg.get("bos_token_id")),
            _first(cfg.get("eos_token_id")),
            int(cfg.get("vocab_size") or 0),
        )
    if (folder / "genai_config.json").is_file():
        model = _json(folder / "genai_config.json").get("model") or {}
        return (
            _first(model.get("bos_token_id")),
            _first(model.get("eos_token_id")),
            int(model.get("vocab_size") or 0),
        )
    return None, None, 0


def folder_vocab(folder: str | os.PathLike[str]) -> VocabInfo:
    """VocabInfo of a Hugging Face or ONNX folder (tokenizer.json, padded like the GGUF)."""
    folder = Path(folder)
    tok = _json(folder / "tokenizer.json")
    model = tok.get("model") or {}
    vocab = model.get("vocab") or {}
    if isinstance(vocab, list):  # Unigram: [[piece, score], ...]
        vocab = {str(p[0]): i for i, p in enumerate(vocab)}
    bos, eos, n_cfg = _special_ids(folder)
    ids = {int(i): str(t) for t, i in vocab.items()}
    ids.update({int(a["id"]): str(a["content"]) for a in tok.get("added_tokens") or []})
    n = max(n_cfg, max(ids, default=-1) + 1)
    texts = tuple(ids.get(i, f"[PAD{i}]") for i in range(n))
    vtype = _HF_VOCAB_TYPES.get(str(model.get("type")), "unknown")
    if vtype == "bpe" and model.get("byte_fallback"):
        vtype = "spm"  # a SentencePiece-style BPE (llama 2): llama.cpp loads it as spm
    return VocabInfo(
        size=n,
        vocab_type=vtype,
        bos_id=bos,
        eos_id=eos,
        eog_ids=frozenset({eos} - {None}),
        fingerprint=fingerprint(texts, bos, -1 if eos is None else eos),
        token_text=texts,
    )


def sentencepiece_refusal(
    path: Path, model: dict[str, Any] | None = None, what: str = "GGUF export"
) -> str:
    """One line: which vocabulary this is, that it is not supported, and what to do instead."""
    if model is None:
        kind = "a SentencePiece vocabulary (tokenizer.model, no tokenizer.json)"
    elif model.get("type") == "BPE":
        kind = "a SentencePiece-style BPE vocabulary (byte fallback)"
    else:
        kind = f"a {model.get('type')} vocabulary"
    return (
        f"{path}: {kind}, as Llama 2, Gemma and Phi-3-mini ship, is not supported for "
        f"{what}; only byte-level BPE vocabularies convert (Qwen2/Qwen3, Llama 3, SmolLM, "
        "Granite, StarCoder2, Phi-4): convert this model with llama.cpp's convert_hf_to_gguf.py "
        "and pass the .gguf to edge-spec export"
    )


def model_vocab(path: str | os.PathLike[str]) -> VocabInfo:
    """VocabInfo of a .gguf file or a folder with tokenizer.json (HF checkpoint, ONNX, bundle part)."""
    p = Path(path)
    if p.is_dir():
        if not (p / "tokenizer.json").is_file():
            if (p / "tokenizer.model").is_file():
                raise UserError(sentencepiece_refusal(p / "tokenizer.model", what="export"))
            raise UserError(f"{p}: no tokenizer.json in this folder; cannot check pairing")
        return folder_vocab(p)
    return gguf_vocab(p)

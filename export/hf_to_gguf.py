"""Hugging Face checkpoint (safetensors) -> f16 or f32 GGUF, for the families in `gguf_arches`.

Built on the pip `gguf` package (writer, tensor-name map, SpecialVocab); the weights are read
straight from the safetensors files with numpy memory maps, so torch is not needed and memory
stays at about one tensor. The result is what `llama_model_quantize` takes as input.

Example: `hf_to_gguf("exports/smollm2-hf", "smollm2-f16.gguf")`
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_spec.errors import UserError, require
from edge_spec.export.gguf_arches import ARCHES, Arch, arch_of, norm_eps, rope_dims, transform
from edge_spec.export.gguf_info import sentencepiece_refusal
from edge_spec.fsutil import atomic_path
from edge_spec.store.checkpoint import check_hf_checkpoint

OUT_TYPES = ("f16", "f32")
# Pre-tokenizer split regexes of known vocabularies -> llama.cpp's pre-tokenizer name. These are
# the published patterns of the Qwen2 and Llama 3 tokenizers (data, not code).
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
    r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}"
    r"\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SPLITS = {_QWEN2_SPLIT: "qwen2", _LLAMA3_SPLIT: "llama-bpe"}
_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64}
_SKIPPED = ("rotary_emb.inv_freq",)
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class _Tensor:
    """One safetensors entry: where its bytes are and what they are."""

    name: str
    file: Path
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int


def read_config(folder: Path) -> dict[str, Any]:
    """config.json of a checkpoint folder, with the architecture checked."""
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{folder}/config.json: cannot read it ({exc})") from None
    if not isinstance(cfg, dict) or arch_of(cfg) is None:
        kind = cfg.get("model_type") if isinstance(cfg, dict) else None
        raise UserError(
            f"{folder}: model_type {kind!r} is not supported for GGUF export; "
            f"supported: {', '.join(ARCHES)}"
        )
    return cfg


def hf_to_gguf(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    out_type: str = "f16",
    progress: Progress | None = None,
) -> Path:
    """Convert checkpoint folder `src` into GGUF file `dst` (written atomically)."""
    gguf = require("gguf", "export")
    if out_type not in OUT_TYPES:
        raise UserError(f"unknown GGUF output type {out_type!r}: use one of {', '.join(OUT_TYPES)}")
    folder = check_hf_checkpoint(src)
    cfg = read_config(folder)
    arch = arch_of(cfg)
    assert arch is not None  # read_config refused the others
    tensors = _plan(folder, cfg, arch.gguf)
    writer = gguf.GGUFWriter(None, arch.gguf)
    _add_hparams(writer, gguf, cfg, folder, out_type, arch)
    _add_vocab(writer, gguf, folder, cfg)
    for name, t in tensors:
        shape, dt = t.shape, _out_dtype(t, out_type)
        writer.add_tensor_info(name, shape, dt, math.prod(shape) * dt.itemsize)
    total, done = sum(t.end - t.start for _, t in tensors), 0
    with atomic_path(dst) as tmp:
        writer.write_header_to_file(tmp)
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        try:
            for name, t in tensors:
                writer.write_tensor_data(_load(t, cfg, arch, name, out_type))
                done += t.end - t.start
                if progress:
                    progress(done, total)
        finally:
            writer.close()
    return Path(dst)


def _out_dtype(t: _Tensor, out_type: str) -> np.dtype:
    # Norms and biases (1-D) stay f32 as llama.cpp expects; matrices take the output type.
    return np.dtype(np.float16 if out_type == "f16" and len(t.shape) >= 2 else np.float32)


def _plan(folder: Path, cfg: dict[str, Any], arch: str) -> list[tuple[str, _Tensor]]:
    """(GGUF name, tensor) for every weight to write, in file order; unknown names refused."""
    gguf = require("gguf", "export")
    n_blocks = int(cfg["num_hidden_layers"])
    names = gguf.get_tensor_name_map(getattr(gguf.MODEL_ARCH, arch.upper()), n_blocks)
    tied = bool(cfg.get("tie_word_embeddings", False))
    out: list[tuple[str, _Tensor]] = []
    for t in safetensors_tensors(folder):
        if t.name.endswith(_SKIPPED) or (tied and t.name == "lm_head.weight"):
            continue  # recomputed by llama.cpp / the same matrix as the embeddings
        name = names.get_name(t.name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise UserError(
                f"{folder}: tensor {t.name!r} has no GGUF name for {arch}; "
                "this checkpoint has parts the converter does not know"
            )
        out.append((name, t))
    if not out:
        raise UserError(f"{folder}: the safetensors files hold no tensors")
    return out


def safetensors_tensors(folder: Path) -> Iterator[_Tensor]:
    """The tensors of every *.safetensors file, header-checked before any data is read."""
    for path in sorted(folder.glob("*.safetensors")):
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else -1
            if not 2 <= n <= min(size - 8, 100 << 20):
                raise UserError(f"{path}: not a valid safetensors file (bad header length)")
            try:
                header = json.loads(fh.read(n))
            except ValueError:
                raise UserError(f"{path}: not a valid safetensors file (bad header)") from None
        base = 8 + n
        for name, info in sorted(header.items(), key=lambda kv: str(kv[0])):
            if name == "__metadata__":
                continue
            yield _entry(path, name, info, base, size)


def _entry(path: Path, name: str, info: Any, base: int, size: int) -> _Tensor:
    try:
        dtype, shape = str(info["dtype"]), tuple(int(d) for d in info["shape"])
        start, end = (base + int(o) for o in info["data_offsets"])
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{path}: bad safetensors entry for {name!r}") from None
    if dtype not in _ST_DTYPES:
        raise UserError(
            f"{path}: tensor {name!r} is {dtype}; export supports {', '.join(_ST_DTYPES)} weights"
        )
    nbytes = math.prod(shape) * np.dtype(_ST_DTYPES[dtype]).itemsize
    if not base <= start <= end <= size or end - start != nbytes:
        raise UserError(f"{path}: tensor {name!r} lies outside the file or has the wrong size")
    return _Tensor(name, path, dtype, shape, start, end)


def _load(t: _Tensor, cfg: dict[str, Any], arch: Arch, name: str, out_type: str) -> np.ndarray:
    """The tensor's data as the output dtype, changed the way llama.cpp expects."""
    raw = np.memmap(t.file, dtype=np.uint8, mode="r", offset=t.start, shape=(t.end - t.start,))
    arr = raw.view(_ST_DTYPES[t.dtype]).reshape(t.shape)
    if t.dtype == "BF16":  # bf16 is the top half of an f32
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    arr = transform(arch, cfg, name, arr)
    return np.ascontiguousarray(arr, dtype=_out_dtype(t, out_type))


def _rope(cfg: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """(rope theta, scaling dict) from transformers 4.x (rope_theta/rope_scaling) or 5.x config."""
    params = cfg.get("rope_parameters") or {}
    params = params.get("full_attention", params)  # Gemma 3: global layers; local ones apart
    theta = params.get("rope_theta", cfg.get("rope_theta", 10000.0))
    scaling = cfg.get("rope_scaling") or (params if params.get("rope_type") else {})
    return float(theta), scaling


def _add_hparams(
    w: Any, gguf: Any, cfg: dict[str, Any], folder: Path, out_type: str, arch: Arch
) -> None:
    """Model hyperparameters from config.json under the GGUF keys llama.cpp reads."""
    try:
        hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
        w.add_name(str(cfg.get("_name_or_path") or cfg.get("_model_name_or_path") or folder.name))
        w.add_context_length(int(cfg.get("max_position_embeddings", 4096)))
        w.add_embedding_length(hidden)
        w.add_block_count(int(cfg["num_hidden_layers"]))
        w.add_feed_forward_length(int(cfg["intermediate_size"]))
        w.add_head_count(heads)
        w.add_head_count_kv(int(cfg.get("num_key_value_heads") or heads))
        if arch.layer_norm:
            w.add_layer_norm_eps(norm_eps(cfg))
        else:
            w.add_layer_norm_rms_eps(norm_eps(cfg))
        head_dim = int(cfg.get("head_dim") or hidden // heads)
        w.add_rope_dimension_count(rope_dims(cfg))
        if arch.extra is not None:
            arch.extra(w, cfg, folder)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{folder}/config.json: missing or bad hyperparameter ({exc})") from None
    if head_dim != hidden // heads or arch.head_dim_keys:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    theta, scaling = _rope(cfg)
    w.add_rope_freq_base(theta)
    kind = scaling.get("rope_type") or scaling.get("type") or "default"
    if kind == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(float(scaling["factor"]))
    elif kind == "yarn":
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(float(scaling["factor"]))
        w.add_rope_scaling_orig_ctx_len(int(scaling["original_max_position_embeddings"]))
    elif kind != "default":
        raise UserError(
            f"{folder}: rope scaling {kind!r} is not supported by this converter "
            "(supported: none, linear, yarn)"
        )
    ftype = gguf.LlamaFileType.MOSTLY_F16 if out_type == "f16" else gguf.LlamaFileType.ALL_F32
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)


def pre_tokenizer_name(tok: dict[str, Any]) -> str:
    """llama.cpp's name for the pre-tokenizer a tokenizer.json describes, or UserError."""
    pre = tok.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    kinds = [s.get("type") for s in steps]
    byte_regex = bool(steps and steps[-1].get("use_regex", True))
    if kinds == ["ByteLevel"] and byte_regex:
        return "gpt-2"
    if kinds == ["Digits", "ByteLevel"] and steps[0].get("individual_digits") and byte_regex:
        return "smollm"
    if kinds == ["Split", "ByteLevel"] and not byte_regex:
        pattern = (steps[0].get("pattern") or {}).get("Regex")
        if pattern in _SPLITS:
            return _SPLITS[pattern]
    raise UserError(
        f"tokenizer.json: pre-tokenizer {kinds} is not one this converter knows "
        "(GPT-2, SmolLM, Qwen2, Llama 3 byte-level BPE)"
    )


def _looks_special(text: str) -> bool:
    # Chat and FIM markers such as <|im_end|> are control tokens even when not flagged special.
    return text.startswith("<|") and text.endswith("|>") and len(text) > 4


def vocab_from_tokenizer(folder: Path, cfg: dict[str, Any]) -> tuple[list[str], list[int], str]:
    """(token texts, GGUF token types, pre-tokenizer) from tokenizer.json, padded to vocab_size."""
    gguf = require("gguf", "export")
    path = folder / "tokenizer.json"
    if not path.is_file() and (folder / "tokenizer.model").is_file():
        raise UserError(sentencepiece_refusal(folder / "tokenizer.model"))
    try:
        tok = json.loads(path.read_text(encoding="utf-8"))
        model, added = tok["model"], tok.get("added_tokens") or []
        vocab: dict[str, int] = model["vocab"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(
            f"{path}: cannot read the tokenizer ({exc}); a tokenizer.json is needed for GGUF export"
        ) from None
    if model.get("type") != "BPE" or model.get("byte_fallback"):
        raise UserError(sentencepiece_refusal(path, model))
    pre = pre_tokenizer_name(tok)
    ids = list(vocab.values()) + [int(a["id"]) for a in added]
    n = max(int(cfg.get("vocab_size") or 0), max(ids) + 1)
    texts = [f"[PAD{i}]" for i in range(n)]
    types = [int(gguf.TokenType.UNUSED)] * n
    for text, i in vocab.items():
        # A vocabulary that came out of a GGUF carries its padding as "[PADn]" entries.
        unused = text == f"[PAD{i}]"
        texts[i], types[i] = text, int(gguf.TokenType.UNUSED if unused else gguf.TokenType.NORMAL)
    for a in added:
        i, text = int(a["id"]), str(a["content"])
        special = a.get("special") or _looks_special(text)
        texts[i] = text
        types[i] = int(gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
    return texts, types, pre


def _add_vocab(w: Any, gguf: Any, folder: Path, cfg: dict[str, Any]) -> None:
    """Tokens, types, merges, special ids and chat template."""
    texts, types, pre = vocab_from_tokenizer(folder, cfg)
    w.add_vocab_size(len(texts))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(texts)
    w.add_token_types(types)
    special = gguf.SpecialVocab(folder, load_merges=True, n_vocab=len(texts))
    if not special.merges:
        raise UserError(f"{folder}/tokenizer.json: no BPE merges found")
    # HF adds BOS only where the post-processor says so; say it explicitly for llama.cpp.
    special.add_special_token.setdefault("bos", False)
    special.add_to_gguf(w, quiet=True)

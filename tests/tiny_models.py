"""Random-init tiny checkpoints of each architecture family, built offline with transformers.

Two layers and a small hidden size, so one export -> run round trip takes seconds; the weights
are drawn wide enough that greedy decoding has clear argmaxes (a model drawn at the usual 0.02
has logits so flat that f32 rounding alone reorders the top two). The tokenizer is a real one,
taken out of a store GGUF (SmolLM2's for most families; Qwen2.5's, which Qwen3 shares, for the
families in `QWEN_FAMILIES`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

# model_type -> (config class name, extra config fields). Shapes are shared (see `_SHAPE`).
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", {}),
    "qwen2": ("Qwen2Config", {}),
    "qwen3": ("Qwen3Config", {"head_dim": 16, "tie_word_embeddings": True}),
    # six layers: Gemma 3's pattern of five sliding-window layers and one global layer
    "gemma3_text": (
        "Gemma3TextConfig",
        {"head_dim": 16, "query_pre_attn_scalar": 16, "sliding_window": 16, "num_hidden_layers": 6},
    ),
    "phi3": ("Phi3Config", {"original_max_position_embeddings": 512, "pad_token_id": 0}),
    "granite": (
        "GraniteConfig",
        {
            "embedding_multiplier": 4.0,
            "residual_multiplier": 0.5,
            "attention_multiplier": 0.25,
            "logits_scaling": 2.0,
        },
    ),
    "starcoder2": (
        "Starcoder2Config",
        {"use_bias": True, "norm_epsilon": 1e-5, "rms_norm_eps": None},
    ),
}
# Families built with Qwen2.5's vocabulary. Phi-3 is among them because llama.cpp's vocabulary
# loader fails on a phi3 GGUF with SmolLM2's vocabulary (either converter's output).
QWEN_FAMILIES = ("qwen2", "qwen3", "phi3")
_SHAPE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
    "rms_norm_eps": 1e-6,
}
INIT_STD = 0.25


def tokenizer_from_gguf(gguf: Path, out: Path) -> Path:
    """Save the tokenizer of a store GGUF as tokenizer.json (+ config) in folder `out`."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tok.save_pretrained(str(out))
    return out


def build_tiny(
    model_type: str, tokenizer_dir: Path, out: Path, seed: int = 0, **overrides: Any
) -> Path:
    """A random-init checkpoint of `model_type` with the tokenizer in `tokenizer_dir`;
    `overrides` replace config fields (a smaller drafter: `num_hidden_layers=1`)."""
    import torch
    import transformers

    cls_name, extra = FAMILIES[model_type]
    tok = json.loads((tokenizer_dir / "tokenizer.json").read_text(encoding="utf-8"))
    ids = list(tok["model"]["vocab"].values()) + [a["id"] for a in tok.get("added_tokens", [])]
    specials = _special_ids(tokenizer_dir)
    fields = {k: v for k, v in {**_SHAPE, **extra, **overrides}.items() if v is not None}
    cfg = getattr(transformers, cls_name)(
        **fields, vocab_size=max(ids) + 1, initializer_range=INIT_STD, **specials
    )
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    with torch.no_grad():  # norms drawn around one: every weight matters, none is a no-op
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(
                    1.0 + 0.1 * torch.randn_like(p) if "norm" in name else 0.1 * torch.randn_like(p)
                )
    model.save_pretrained(str(out), safe_serialization=True)
    for f in tokenizer_dir.iterdir():
        if f.is_file():
            shutil.copy2(f, out / f.name)
    if model_type == "phi3":  # Phi-4 style: a GPT-2 BPE vocabulary, not SentencePiece
        path = out / "tokenizer_config.json"
        tc = json.loads(path.read_text(encoding="utf-8"))
        tc["tokenizer_class"] = "GPT2Tokenizer"
        path.write_text(json.dumps(tc, indent=2), encoding="utf-8")
    return out


def _special_ids(tokenizer_dir: Path) -> dict[str, int]:
    tc = json.loads((tokenizer_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok = json.loads((tokenizer_dir / "tokenizer.json").read_text(encoding="utf-8"))
    by_text = {a["content"]: a["id"] for a in tok.get("added_tokens", [])}
    by_text.update(tok["model"]["vocab"])
    out = {}
    for key in ("bos_token", "eos_token"):
        text = tc.get(key)
        if isinstance(text, dict):
            text = text.get("content")
        if text in by_text:
            out[f"{key}_id"] = by_text[text]
    return out

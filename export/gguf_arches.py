"""What each Hugging Face architecture needs in GGUF: its llama.cpp name, hyperparameter keys,
and the tensor changes llama.cpp expects (the same ones llama.cpp's own converter makes).

Tensor names come from gguf's TensorNameMap; this table holds only what differs per family:
llama-style rotary rows to interleave, Gemma's norms stored as `weight - 1`, and the settings a
pinned llama.cpp reads from fixed rules rather than from the file, which are checked here so a
checkpoint llama.cpp would run differently from transformers is refused instead of exported.

Example: `ARCHES["qwen3"].gguf` -> 'qwen3'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_spec.errors import UserError

Config = dict[str, Any]
# llama.cpp hard-codes Gemma 3's layer pattern: five sliding-window layers, then one global.
GEMMA3_SWA_PERIOD = 6


@dataclass(frozen=True)
class Arch:
    """How one config.json model_type maps onto a llama.cpp architecture."""

    gguf: str  # llama.cpp architecture name
    interleave_qk: bool = False  # HF stores rotary halves; llama.cpp's "norm" RoPE wants pairs
    norm_shift: float = 0.0  # Gemma's RMSNorm multiplies by (1 + w); llama.cpp by w
    layer_norm: bool = False  # LayerNorm with bias (StarCoder2), not RMSNorm
    head_dim_keys: bool = False  # write key/value length even when it is hidden / heads
    extra: Callable[[Any, Config, Path], None] | None = None  # arch-specific keys and checks


def _gemma3(w: Any, cfg: Config, folder: Path) -> None:
    hd, n = head_dim(cfg), int(cfg["num_hidden_layers"])
    scalar = cfg.get("query_pre_attn_scalar", hd)
    if scalar != hd:
        raise UserError(
            f"{folder}: query_pre_attn_scalar {scalar} differs from head_dim "
            f"{hd}; llama.cpp scales Gemma 3 attention by head_dim"
        )
    expected = [
        "full_attention" if (i + 1) % GEMMA3_SWA_PERIOD == 0 else "sliding_attention"
        for i in range(n)
    ]
    if cfg.get("layer_types") and list(cfg["layer_types"]) != expected:
        raise UserError(
            f"{folder}: layer_types do not follow Gemma 3's pattern of "
            f"{GEMMA3_SWA_PERIOD - 1} sliding-window layers then one global layer, "
            "which llama.cpp assumes"
        )
    if cfg.get("attn_logit_softcapping") is not None:
        raise UserError(f"{folder}: attn_logit_softcapping is set; llama.cpp's Gemma 3 has none")
    params = cfg.get("rope_parameters") or {}
    local = (params.get("sliding_attention") or {}).get(
        "rope_theta", cfg.get("rope_local_base_freq", 10000.0)
    )
    w.add_rope_freq_base_swa(float(local))
    w.add_sliding_window(int(cfg["sliding_window"]))
    if cfg.get("final_logit_softcapping"):
        w.add_final_logit_softcapping(float(cfg["final_logit_softcapping"]))


def _phi3(w: Any, cfg: Config, folder: Path) -> None:
    params = {**(cfg.get("rope_parameters") or {}), **(cfg.get("rope_scaling") or {})}
    if params.get("long_factor") or params.get("short_factor"):
        raise UserError(
            f"{folder}: LongRoPE (Phi-3 128k) is not supported by this converter; "
            "use a 4k-context Phi-3 or Phi-4 checkpoint"
        )
    orig = int(cfg.get("original_max_position_embeddings") or cfg["max_position_embeddings"])
    w.add_rope_scaling_orig_ctx_len(orig)
    w.add_sliding_window(int(cfg.get("sliding_window") or 0))  # 0: no window (Phi-4)


def _granite(w: Any, cfg: Config, folder: Path) -> None:
    for key, add in (
        ("attention_multiplier", w.add_attention_scale),
        ("embedding_multiplier", w.add_embedding_scale),
        ("residual_multiplier", w.add_residual_scale),
        ("logits_scaling", w.add_logit_scale),
    ):
        if cfg.get(key):
            add(float(cfg[key]))


ARCHES: dict[str, Arch] = {
    "llama": Arch("llama", interleave_qk=True),
    "qwen2": Arch("qwen2"),
    "qwen3": Arch("qwen3", head_dim_keys=True),
    "gemma3_text": Arch("gemma3", norm_shift=1.0, head_dim_keys=True, extra=_gemma3),
    "phi3": Arch("phi3", extra=_phi3),
    "granite": Arch("granite", interleave_qk=True, extra=_granite),
    "starcoder2": Arch("starcoder2", layer_norm=True),
}
# config.json model_type values that name the same text model under another key.
ALIASES = {"gemma3": "gemma3_text"}


def arch_of(cfg: Config) -> Arch | None:
    kind = cfg.get("model_type")
    return ARCHES.get(ALIASES.get(kind, kind)) if isinstance(kind, str) else None


def head_dim(cfg: Config) -> int:
    return int(cfg.get("head_dim") or int(cfg["hidden_size"]) // int(cfg["num_attention_heads"]))


def rope_dims(cfg: Config) -> int:
    """Rotary dimensions per head (Phi-3 may rotate only part of each head)."""
    params = cfg.get("rope_parameters") or {}
    part = float(params.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))
    return int(part * head_dim(cfg))


def norm_eps(cfg: Config) -> float:
    for key in ("rms_norm_eps", "norm_epsilon", "layer_norm_eps", "layer_norm_epsilon"):
        if cfg.get(key) is not None:
            return float(cfg[key])
    raise KeyError("rms_norm_eps")


def transform(arch: Arch, cfg: Config, name: str, arr: Any) -> Any:
    """A tensor as llama.cpp wants it: Q/K rows interleaved, Gemma norms shifted."""
    if (
        arch.interleave_qk
        and name.startswith("blk.")
        and (".attn_q." in name or ".attn_k." in name)
    ):
        heads = int(cfg["num_attention_heads"])
        if ".attn_k." in name:
            heads = int(cfg.get("num_key_value_heads") or heads)
        arr = _rope_interleave(arr, heads)
    if arch.norm_shift and name.endswith("norm.weight"):
        arr = arr.astype("float32") + arch.norm_shift
    return arr


def _rope_interleave(w: Any, n_head: int) -> Any:
    """HF llama stores each head's rotary pairs as two halves; GGUF wants them interleaved."""
    half = w.shape[0] // n_head // 2
    return w.reshape(n_head, 2, half, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

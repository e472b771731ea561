"""Batch-invariant numerics for the torch runtime on CPU: a row's logits do not depend on how
many tokens were evaluated with it, bit for bit, so greedy speculative output equals plain greedy.

Measured on the 2-core VMs here (torch 2.13, MKL, fp32, 1 and 2 threads): stock `F.linear`
switches kernels with the row count, and a row's bits change with it: on an AMD EPYC 1-3 rows
differ from 4 or more; on an Intel Xeon with AVX-512, 1 row, 2-15 rows and 16 or more are three
different results. Batched attention also reduces over a longer, masked key range than one-token
attention. SmolLM2's logits then differ by up to 1e-4 between a verify window and one-token
decoding. Two changes make them identical:

- every linear layer runs on a multiple of 16 rows (zero rows appended), where MKL's row results
  were the same for every row count tried on both CPUs (16-529 rows, 1 and 2 threads);
- attention runs one query row at a time over exactly the keys that row sees, so each row repeats
  the one-token computation with the same shapes.

Cost: one-token decoding pays for 16 rows (slower on CPU; memory-bound layers less so), verify
windows about the same. On CUDA none of this applies (other kernels); the runtime uses SDPA there.
"""

from __future__ import annotations

from typing import Any

ATTN_NAME = "edge_spec_rowwise"
ROW_MULTIPLE = 16
# Families whose attention is plain scaled dot-product (no logit soft-capping, no attention
# sinks), so the row-wise function computes what theirs does; others keep stock attention.
PLAIN_ATTENTION = frozenset({"llama", "mistral", "qwen2", "qwen3", "phi3", "granite"})


def rowwise_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    scaling: float,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[Any, None]:
    """Causal attention, one query row at a time; the transformers attention-function contract."""
    import torch
    import torch.nn.functional as F

    b, h, q, d = query.shape
    kvh, n_keys = key.shape[1], key.shape[2]
    groups = h // kvh
    out = query.new_empty(b, q, h, d)
    key_t = key.transpose(2, 3)
    for i in range(q):
        n = n_keys - q + i + 1  # the keys row i may see: everything up to and including itself
        # Grouped-query heads share a KV head: fold them into rows instead of copying K and V.
        qi = query[:, :, i].reshape(b, kvh, groups, d)
        scores = torch.matmul(qi, key_t[..., :n]) * scaling
        if attention_mask is not None:  # sliding windows and the like; zeros otherwise
            scores = scores + attention_mask[:, :, i : i + 1, :n]
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
        out[:, i] = torch.matmul(probs, value[:, :, :n]).reshape(b, h, d)
    return out, None


def _padded_linear(module: Any) -> Any:
    import torch.nn.functional as F

    def forward(x: Any) -> Any:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        m = flat.shape[0]
        pad = -m % ROW_MULTIPLE
        if pad:
            flat = F.pad(flat, (0, 0, 0, pad))
        y = F.linear(flat, module.weight, module.bias)
        return y[:m].reshape(*shape[:-1], y.shape[-1])

    return forward


def make_batch_invariant(model: Any) -> bool:
    """Switch `model` to batch-invariant linear layers and attention; False if not possible."""
    import torch

    if getattr(model.config, "model_type", "") not in PLAIN_ATTENTION:
        return False
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, eager_mask
    except ImportError:  # transformers too old for custom attention functions
        return False
    AttentionInterface.register(ATTN_NAME, rowwise_attention)
    AttentionMaskInterface.register(ATTN_NAME, eager_mask)
    try:
        model.set_attn_implementation(ATTN_NAME)
    except (ValueError, KeyError, AttributeError):
        return False
    for mod in model.modules():
        if isinstance(mod, torch.nn.Linear):
            # An instance attribute shadows the class's forward for this module only.
            mod.forward = _padded_linear(mod)
    return True

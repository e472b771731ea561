"""A GGUF file as a torch model, through transformers' GGUF loader (dequantized).

Shared by the torch runtime (a GGUF as the numeric reference) and the exporter (GGUF -> HF).
"""

from __future__ import annotations

import os
from pathlib import Path

from edge_spec.errors import UserError, require
from edge_spec.store.validate import check_gguf


def load_gguf_model(path: str | os.PathLike[str], dtype: str = "float32"):  # noqa: ANN201
    """(model, tokenizer) of a GGUF file, dequantized, ready to save or run."""
    torch = require("torch", "torch")
    transformers = require("transformers", "torch")
    require("accelerate", "torch")  # transformers' GGUF loader needs it
    path = Path(path)
    check_gguf(path)
    kw = {"gguf_file": path.name, "dtype": getattr(torch, dtype)}
    try:
        tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), **kw)
    except (ValueError, KeyError, OSError, RuntimeError) as exc:
        raise UserError(
            f"{path}: transformers cannot load this GGUF ({exc}); only "
            "architectures transformers' GGUF loader knows are supported"
        ) from exc
    # The GGUF quantizer marker makes save_pretrained refuse ("not serializable"); the weights
    # are already dequantized, so drop it (docs/runtimes.md).
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.eval()
    return model, tok

"""GGUF -> Hugging Face checkpoint (safetensors), through transformers' GGUF loader.

The weights are dequantized to float32; this is the way into exporters that start from a
Hugging Face checkpoint (ONNX, re-quantized GGUF) and into the torch runtime.

>>> gguf_to_hf("smollm2-135m-instruct-q4_1.gguf", "out/smollm2-hf")   # doctest: +SKIP
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from edge_spec.errors import UserError, require
from edge_spec.fsutil import temp_dir


def load_gguf_model(path: str | os.PathLike[str], dtype: str = "float32"):  # noqa: ANN201
    """(model, tokenizer) of a GGUF file, dequantized, ready to save or run."""
    torch = require("torch", "torch")
    transformers = require("transformers", "torch")
    require("accelerate", "torch")  # transformers' GGUF loader needs it
    path = Path(path)
    from edge_spec.validate import check_gguf

    check_gguf(path)
    kw = {"gguf_file": path.name, "dtype": getattr(torch, dtype)}
    try:
        tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), **kw)
    except (ValueError, KeyError, OSError, RuntimeError) as exc:
        raise UserError(f"{path}: transformers cannot load this GGUF ({exc}); only "
                        "architectures transformers' GGUF loader knows are supported") from exc
    # The GGUF quantizer marker makes save_pretrained refuse ("not serializable"); the weights
    # are already dequantized, so drop it (DESIGN.md section 10).
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.eval()
    return model, tok


def gguf_to_hf(src: str | os.PathLike[str], out: str | os.PathLike[str],
               dtype: str = "float32") -> Path:
    """Write a safetensors checkpoint of GGUF `src` to folder `out`, atomically (temp + rename)."""
    out = Path(out)
    if out.exists():
        raise UserError(f"{out} already exists: remove it or choose another --out")
    model, tok = load_gguf_model(src, dtype)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir(out.parent, f".{out.name}.")
    try:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out

"""GGUF -> Hugging Face checkpoint (safetensors), through transformers' GGUF loader.

The weights are dequantized to float32; this is the way into exporters that start from a
Hugging Face checkpoint (ONNX, re-quantized GGUF) and into the torch runtime.

Example: `gguf_to_hf("smollm2-135m-instruct-q4_1.gguf", "out/smollm2-hf")`
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from edge_spec.errors import UserError
from edge_spec.fsutil import temp_dir
from edge_spec.runtimes.gguf_torch import load_gguf_model


def gguf_to_hf(
    src: str | os.PathLike[str], out: str | os.PathLike[str], dtype: str = "float32"
) -> Path:
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

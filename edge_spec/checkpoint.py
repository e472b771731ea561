"""Safety checks for model folders before a library opens them (DESIGN.md section 7).

Hugging Face checkpoints load from safetensors only: a pickle file can run code when unpickled.

>>> check_hf_checkpoint("exports/smollm2-hf")   # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path

from edge_spec.errors import UserError

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")


def check_hf_checkpoint(path: str | os.PathLike[str]) -> Path:
    """A Hugging Face checkpoint folder with config.json and safetensors weights, or UserError."""
    folder = Path(path)
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder; pass a Hugging Face checkpoint folder")
    if not (folder / "config.json").is_file():
        raise UserError(f"{folder}: no config.json; this is not a Hugging Face checkpoint folder")
    names = [p.name for p in folder.iterdir() if p.is_file()]
    if any(n.endswith(".safetensors") for n in names):
        return folder
    pickles = sorted(n for n in names if n.endswith(PICKLE_SUFFIXES))
    if pickles:
        raise UserError(
            f"{folder}: weights are pickle files ({pickles[0]}), which can run code when loaded; "
            "edge-spec loads safetensors only: convert once in a sandbox with "
            "`AutoModelForCausalLM.from_pretrained(dir).save_pretrained(out, "
            "safe_serialization=True)`")
    raise UserError(f"{folder}: no *.safetensors weights found")

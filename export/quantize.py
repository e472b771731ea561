"""GGUF quantization with llama.cpp (`llama_model_quantize`, through llama-cpp-python).

Example: `quantize_gguf("smollm2-f16.gguf", "smollm2-q8_0.gguf", "Q8_0")`
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from edge_spec.errors import UserError, require
from edge_spec.fsutil import atomic_path
from edge_spec.store.validate import FILE_TYPES, check_gguf

# Quant name -> llama_ftype constant in llama_cpp (LLAMA_FTYPE_<suffix>).
QUANTS: dict[str, str] = {
    "F32": "ALL_F32",
    "F16": "MOSTLY_F16",
    "BF16": "MOSTLY_BF16",
    "Q8_0": "MOSTLY_Q8_0",
    "Q6_K": "MOSTLY_Q6_K",
    "Q5_K_M": "MOSTLY_Q5_K_M",
    "Q5_K_S": "MOSTLY_Q5_K_S",
    "Q5_0": "MOSTLY_Q5_0",
    "Q5_1": "MOSTLY_Q5_1",
    "Q4_K_M": "MOSTLY_Q4_K_M",
    "Q4_K_S": "MOSTLY_Q4_K_S",
    "Q4_0": "MOSTLY_Q4_0",
    "Q4_1": "MOSTLY_Q4_1",
    "IQ4_NL": "MOSTLY_IQ4_NL",
    "IQ4_XS": "MOSTLY_IQ4_XS",
    "Q3_K_L": "MOSTLY_Q3_K_L",
    "Q3_K_M": "MOSTLY_Q3_K_M",
    "Q3_K_S": "MOSTLY_Q3_K_S",
    "Q2_K": "MOSTLY_Q2_K",
}
# general.file_type values of unquantized files (validate.FILE_TYPES names).
UNQUANTIZED = ("ALL_F32", "MOSTLY_F16", "MOSTLY_BF16")


def quant_name(name: str) -> str:
    """The canonical quant name ('q4_k_m' -> 'Q4_K_M'), or UserError listing the valid ones."""
    key = name.strip().upper().replace("-", "_")
    if key not in QUANTS:
        raise UserError(f"unknown GGUF quantization {name!r}: use one of {', '.join(QUANTS)}")
    return key


def gguf_quant(path: str | os.PathLike[str]) -> str | None:
    """The quant name a GGUF file declares (general.file_type), e.g. 'Q4_K_M', or None."""
    ftype = check_gguf(path).metadata.get("general.file_type")
    name = FILE_TYPES.get(ftype) if isinstance(ftype, int) else None
    if name is None:
        return None
    for quant, const in QUANTS.items():
        if const == name:
            return quant
    return name.removeprefix("MOSTLY_")


def quantize_gguf(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], quant: str, threads: int = 0
) -> Path:
    """Quantize GGUF `src` to `quant` into `dst` (atomic); an already-quantized `src` is
    re-quantized (llama.cpp dequantizes it first, so errors compound: prefer an f16 source)."""
    llama_cpp = require("llama_cpp", "llamacpp")
    quant = quant_name(quant)
    check_gguf(src)  # llama.cpp trusts header lengths; a bad file is refused here first
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_{QUANTS[quant]}")
    params.nthread = threads or max(1, os.cpu_count() or 1)
    params.allow_requantize = True  # a quantized GGUF source is re-quantized directly
    with atomic_path(dst, suffix=".gguf.part") as tmp, _quiet():
        rc = llama_cpp.llama_model_quantize(os.fsencode(src), os.fsencode(tmp), params)
        if rc != 0:
            raise UserError(f"llama.cpp could not quantize {src} to {quant} (code {rc})")
    return Path(dst)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence llama.cpp's per-tensor log lines so the progress display stays readable."""
    logger = logging.getLogger("llama-cpp-python")  # llama-cpp-python's log callback obeys it
    old = logger.level
    if not os.environ.get("EDGE_SPEC_DEBUG"):
        logger.setLevel(logging.CRITICAL)  # its WARN lines map to ERROR here
    try:
        yield
    finally:
        logger.setLevel(old)

"""Runtimes: backends that evaluate tokens into logits.

Each backend is one module with a `open_runtime(path, options) -> Runtime` function; this table
is the only place that names their modules, so adding a backend is one new file plus one line
here and its name in `edge_spec.config.settings.BACKENDS`.

>>> from edge_spec.runtimes import open_runtime, RuntimeOptions

Example: `rt = open_runtime("llamacpp", "model.gguf", RuntimeOptions(n_ctx=2048))`
"""

from __future__ import annotations

import importlib
import os

from edge_spec.config.settings import BACKEND_ALIASES, BACKENDS, canonical_backend
from edge_spec.errors import UserError
from edge_spec.runtimes.base import Runtime, RuntimeOptions

# name -> (module, extra that installs its library)
MODULES: dict[str, tuple[str, str]] = {
    "llamacpp": ("edge_spec.runtimes.llamacpp", "llamacpp"),
    "ort": ("edge_spec.runtimes.ort", "onnx"),
    "torch": ("edge_spec.runtimes.hf", "torch"),
}
ALIASES = BACKEND_ALIASES
assert set(MODULES) == set(BACKENDS), "every backend in the settings tree needs a module"


def backend_name(name: str) -> str:
    """Canonical backend name; raises UserError for an unknown one."""
    key = canonical_backend(name)
    if key is None:
        raise UserError(f"unknown runtime {name!r}: use one of {', '.join(BACKENDS)}")
    return key


def open_runtime(name: str, path: str | os.PathLike[str], options: RuntimeOptions) -> Runtime:
    """Open the model at `path` with backend `name`."""
    module = importlib.import_module(MODULES[backend_name(name)][0])
    return module.open_runtime(path, options)


__all__ = [
    "ALIASES",
    "BACKENDS",
    "MODULES",
    "Runtime",
    "RuntimeOptions",
    "backend_name",
    "open_runtime",
]

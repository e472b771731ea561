"""Safety checks for model folders before a library opens them (docs/design.md, "Untrusted inputs").

Hugging Face checkpoints load from safetensors only: a pickle file can run code when unpickled.

Example: `check_hf_checkpoint("exports/smollm2-hf")`
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath

from edge_spec.errors import UserError, require

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
            "safe_serialization=True)`"
        )
    raise UserError(f"{folder}: no *.safetensors weights found")


def check_onnx_dir(path: str | os.PathLike[str]) -> Path:
    """An ONNX model folder whose external-data files all lie inside it, or UserError.

    An external-data `location` is a path the loader opens: an absolute one, one with `..`, or
    a symlink out of the folder would make ONNX Runtime read (and map) any file on the machine.
    Only the protobuf is parsed; weights are not loaded.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder; pass an exported ONNX model folder")
    onnx = _require_onnx()
    root = folder.resolve()
    models = sorted(folder.rglob("*.onnx"))
    if not models:
        raise UserError(f"{folder}: no .onnx file found; pass an exported ONNX model folder")
    for model_path in models:
        if not model_path.resolve().is_relative_to(root):
            raise UserError(f"{model_path}: links outside the model folder; refusing to load it")
        try:
            model = onnx.load(str(model_path), load_external_data=False)
        except Exception as exc:  # noqa: BLE001 - protobuf raises its own DecodeError types
            raise UserError(f"{model_path}: not a valid ONNX file ({type(exc).__name__})") from None
        for tensor in _onnx_tensors(model):
            if tensor.data_location != onnx.TensorProto.EXTERNAL:
                continue
            where = {e.key: e.value for e in tensor.external_data}.get("location", "")
            _check_location(model_path, root, tensor.name, where)
    return folder


def _require_onnx():  # noqa: ANN202 - a module
    return require("onnx", "onnx")


def _check_location(model_path: Path, root: Path, name: str, where: str) -> None:
    """Refuse an external-data location that is empty, absolute, has `..` or resolves outside."""
    win = PureWindowsPath(where)
    bad = (
        not where
        or PurePosixPath(where).is_absolute()
        or win.is_absolute()
        or win.drive
        or ".." in PurePosixPath(where).parts
        or ".." in win.parts
    )
    target = (model_path.parent / where).resolve()
    if bad or not target.is_relative_to(root):
        raise UserError(
            f"{model_path.name}: tensor {name!r} points its external data at "
            f"{where!r}, outside the model folder; refusing to load this model"
        )
    if not target.is_file():
        raise UserError(
            f"{model_path.name}: external data file {where!r} of tensor {name!r} "
            "is missing; copy the whole exported folder"
        )


def _onnx_tensors(model) -> list:  # noqa: ANN001 - onnx.ModelProto
    """Every TensorProto of a model: initializers, sparse ones, constants, in all subgraphs."""
    out: list = []
    graphs = [model.graph]
    nodes = [n for f in model.functions for n in f.node]
    while graphs or nodes:
        if graphs:
            g = graphs.pop()
            out.extend(g.initializer)
            for sp in g.sparse_initializer:
                out.extend((sp.values, sp.indices))
            nodes.extend(g.node)
            continue
        for attr in nodes.pop().attribute:
            if attr.HasField("t"):
                out.append(attr.t)
            out.extend(attr.tensors)
            if attr.HasField("g"):
                graphs.append(attr.g)
            graphs.extend(attr.graphs)
            if attr.HasField("sparse_tensor"):
                out.extend((attr.sparse_tensor.values, attr.sparse_tensor.indices))
            for sp in attr.sparse_tensors:
                out.extend((sp.values, sp.indices))
    return out

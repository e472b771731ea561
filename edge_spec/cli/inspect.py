"""`edge-spec inspect PATH [PATH2]`: what a GGUF, ONNX folder, HF checkpoint or bundle holds,
and for two paths whether they pair as target and drafter (docs/design.md, "Pairing").
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from edge_spec.cli.output import emit_json
from edge_spec.core.pairing import pair_problem
from edge_spec.errors import UserError
from edge_spec.export.bundle import bundle_models, is_bundle, load_bundle
from edge_spec.export.gguf_info import folder_vocab, model_vocab, read_gguf_fields
from edge_spec.export.hf_to_gguf import safetensors_tensors
from edge_spec.store.checkpoint import check_hf_checkpoint
from edge_spec.store.models import resolve
from edge_spec.store.validate import check_gguf, gguf_summary


def describe(text: str) -> dict[str, Any]:
    """A JSON-ready summary of the model or bundle at `text` (a path or a store name)."""
    path = Path(text).expanduser()
    if path.is_dir():
        if is_bundle(path):
            return _bundle(path)
        if (path / "genai_config.json").is_file() or any(path.glob("*.onnx")):
            return _onnx(path)
        if (path / "config.json").is_file():
            return _hf(path)
        raise UserError(f"{path}: not a bundle, ONNX folder or Hugging Face checkpoint")
    if not path.exists():
        path = resolve(text, pull_missing=False)
    return _gguf(path)


def _gguf(path: Path) -> dict[str, Any]:
    s = gguf_summary(check_gguf(path))
    meta = read_gguf_fields(
        path,
        (
            "tokenizer.ggml.model",
            "tokenizer.ggml.pre",
            "tokenizer.ggml.bos_token_id",
            "tokenizer.ggml.eos_token_id",
        ),
    )
    return {
        "kind": "gguf",
        "path": str(path),
        "architecture": s["architecture"],
        "name": s["name"],
        "parameters": s["parameter_count"],
        "quant": (s["file_type"] or "").removeprefix("MOSTLY_").removeprefix("ALL_") or None,
        "quant_mix": s["quant_mix"],
        "context_length": s["context_length"],
        "layers": s["block_count"],
        "size": s["file_size"],
        "tokenizer": {
            "model": meta.get("tokenizer.ggml.model"),
            "pre": meta.get("tokenizer.ggml.pre"),
            "vocab_size": s["vocab_size"],
            "bos_id": meta.get("tokenizer.ggml.bos_token_id"),
            "eos_id": meta.get("tokenizer.ggml.eos_token_id"),
        },
    }


def _folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _tokenizer(path: Path) -> dict[str, Any]:
    if not (path / "tokenizer.json").is_file():
        return {}
    v = folder_vocab(path)
    return {"model": v.vocab_type, "vocab_size": v.size, "bos_id": v.bos_id, "eos_id": v.eos_id}


def _onnx(path: Path) -> dict[str, Any]:
    cfg: dict[str, Any] = {}
    if (path / "genai_config.json").is_file():
        cfg = json.loads((path / "genai_config.json").read_text(encoding="utf-8")).get("model", {})
    params, mix = _onnx_weights(path, (cfg.get("decoder") or {}).get("filename", "model.onnx"))
    return {
        "kind": "onnx",
        "path": str(path),
        "architecture": cfg.get("type"),
        "parameters": params,
        "quant_mix": mix,
        "context_length": cfg.get("context_length"),
        "layers": (cfg.get("decoder") or {}).get("num_hidden_layers"),
        "size": _folder_size(path),
        "tokenizer": _tokenizer(path),
    }


def _onnx_weights(path: Path, name: str) -> tuple[int | None, dict[str, int]]:
    """(parameter count, weight kinds) from the graph, without loading external data."""
    try:
        import onnx
    except ImportError:
        return None, {}
    model_file = path / name
    if not model_file.is_file():
        return None, {}
    graph = onnx.load(str(model_file), load_external_data=False).graph
    params, mix, aux = 0, {}, set()
    for node in graph.node:
        if node.op_type == "MatMulNBits":  # packed weights: K x N at `bits` bits
            attrs = {a.name: a.i for a in node.attribute}
            params += attrs.get("K", 0) * attrs.get("N", 0)
            key = f"MatMulNBits int{attrs.get('bits', 4)}"
            mix[key] = mix.get(key, 0) + 1
            aux.update(node.input[1:])
    for init in graph.initializer:
        if init.name in aux:
            continue
        kind = onnx.TensorProto.DataType.Name(init.data_type)
        mix[kind] = mix.get(kind, 0) + 1
        params += math.prod(init.dims)
    return params, dict(sorted(mix.items(), key=lambda kv: -kv[1]))


def _hf(path: Path) -> dict[str, Any]:
    check_hf_checkpoint(path)
    cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    params, mix = 0, {}
    for t in safetensors_tensors(path):
        params += math.prod(t.shape)
        mix[t.dtype] = mix.get(t.dtype, 0) + 1
    return {
        "kind": "hf",
        "path": str(path),
        "architecture": cfg.get("model_type"),
        "parameters": params,
        "quant_mix": mix,
        "context_length": cfg.get("max_position_embeddings"),
        "layers": cfg.get("num_hidden_layers"),
        "size": _folder_size(path),
        "tokenizer": _tokenizer(path),
    }


def _bundle(path: Path) -> dict[str, Any]:
    b = load_bundle(path)
    m = b.manifest
    models = {}
    for role in ("target", "drafter"):
        for fmt in ("gguf", "onnx"):
            p = b.model_path(role, fmt)
            if p is not None:
                models[f"{role}.{fmt}"] = _gguf(p) if fmt == "gguf" else _onnx(p)
    return {
        "kind": "bundle",
        "path": str(path),
        "default_runtime": m.default_runtime,
        "recommended_profile": m.recommended_profile,
        "created_by": m.created_by,
        "size": sum(f.size for f in m.files),
        "tokenizer": asdict(m.tokenizer),
        "files": [asdict(f) for f in m.files],
        "checks": [asdict(c) for c in m.checks],
        "models": models,
    }


def pairing(a: str, b: str) -> dict[str, Any]:
    """Whether model `b` can draft for target `a`: {'pairs': bool, 'reason': str | None}."""
    problem = pair_problem(model_vocab(_model_path(a)), model_vocab(_model_path(b)))
    return {"target": a, "drafter": b, "pairs": problem is None, "reason": problem}


def _model_path(text: str) -> Path:
    path = Path(text).expanduser()
    if path.is_dir() and is_bundle(path):
        target, _, _ = bundle_models(path)
        return target
    if path.is_dir():
        return path
    return path if path.exists() else resolve(text, pull_missing=False)


@click.command("inspect")
@click.argument("path")
@click.argument("path2", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def inspect_cmd(path: str, path2: str | None, as_json: bool) -> None:
    """Show what PATH holds; with PATH2, whether PATH2 can draft for PATH (exit 2 if not)."""
    info = describe(path)
    pair = None
    if path2 is not None:
        info = {"target": info, "drafter": describe(path2)}
        pair = pairing(path, path2)
        info["pairing"] = pair
    if as_json:
        emit_json(info)
    else:
        for d in [info] if pair is None else [info["target"], info["drafter"]]:
            _table(d)
    if pair is not None and not pair["pairs"]:
        if as_json:
            raise SystemExit(2)
        raise UserError(
            f"{path2} cannot draft for {path}: {pair['reason']}; use a drafter "
            "with the same tokenizer (e.g. the same model family)"
        )
    if pair is not None and not as_json:
        click.echo(f"{path2} can draft for {path}: the vocabularies pair")


def _rows(d: dict[str, Any]) -> list[tuple[str, str]]:
    tok = d.get("tokenizer") or {}
    mix = ", ".join(f"{k} x{v}" for k, v in (d.get("quant_mix") or {}).items())
    rows = [("kind", d["kind"]), ("path", d["path"])]
    for key in (
        "architecture",
        "name",
        "quant",
        "layers",
        "context_length",
        "default_runtime",
        "recommended_profile",
    ):
        if d.get(key) not in (None, ""):
            rows.append((key.replace("_", " "), str(d[key])))
    if d.get("parameters"):
        rows.append(("parameters", f"{d['parameters'] / 1e6:,.1f} M"))
    if mix:
        rows.append(("quant mix", mix))
    rows.append(("size", f"{d['size'] / 1e6:,.1f} MB"))
    if tok:
        rows.append(("tokenizer", " ".join(f"{k}={v}" for k, v in tok.items() if v is not None)))
    for f in d.get("files", []):
        what = " ".join(x for x in (f["format"], f["quant"]) if x)
        rows.append((f"{f['role']} file", f"{f['path']} ({what}, {f['size'] / 1e6:,.1f} MB)"))
    for c in d.get("checks", []):
        rows.append(
            (
                "check",
                f"{c['path']}: {c['agreement']:.0%} of {c['tokens']} tokens, "
                f"max logit diff {c['max_logit_diff']}",
            )
        )
    return rows


def _table(d: dict[str, Any]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        for k, v in _rows(d):
            click.echo(f"{k:<20} {v}")
        return
    table = Table(show_header=False, title=os.path.basename(d["path"]) or d["path"])
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for k, v in _rows(d):
        table.add_row(k, v)
    Console().print(table)

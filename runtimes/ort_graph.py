"""Load-time edits of an exported decoder graph, made in memory before ONNX Runtime loads it.

- rows: a Gather on the lm_head's input selecting rows by `ROWS_INPUT`, so a prefill chunk
  projects one row to the vocabulary instead of all of them.
- argmax: `ScatterND(logits, BAN_AT, BAN_VALUE) -> ArgMax(axis=-1)` as output `ARGMAX`, so greedy
  verification reads back one id per row instead of the logits (which on CUDA then never leave
  the device). It reads the `logits` output itself, so its ids are those of the very logits
  `eval` returns; the two edits compose (with rows, `ARGMAX` has one id per selected row).

Measured on onnxruntime 1.32 (CPU, float32 and float16): ScatterND with zero indices is the
identity, and ArgMax (select_last_index=0) picks the first maximal index, as numpy does, also on
all-equal rows of a 152k vocabulary. One difference remains: numpy's argmax returns the first
NaN, ORT's ignores NaNs; a decoder that emits NaN logits is broken either way.

onnx is an optional extra: without it, or on a graph these edits do not recognise, the decoder
runs unedited and the runtime falls back to host logits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from edge_spec.runtimes.base import Banned

ROWS_INPUT = "edge_spec_logits_rows"
BAN_AT = "edge_spec_ban_at"  # int64 [n, 3]: (0, row, token id) entries to mask
BAN_VALUE = "edge_spec_ban_value"  # [n], the logits' dtype: -inf at each of those entries
ARGMAX = "edge_spec_argmax"  # int64 [1, rows]: each row's argmax after the mask


class Edits(NamedTuple):
    """Which edits the loaded graph carries."""

    rows: bool = False
    argmax: bool = False


def edited_graph(file: Path) -> tuple[bytes, Edits] | None:
    """The decoder with every edit its graph allows, serialized; None if none applies."""
    try:
        import onnx
    except ImportError:
        return None
    model = onnx.load(str(file), load_external_data=False)
    # rows first: the argmax output then takes the logits' (row-selected) shape.
    edits = Edits(rows=_add_rows(model), argmax=_add_argmax(model))
    return (model.SerializeToString(), edits) if any(edits) else None


def ban_feeds(banned: Banned, rows: int, dtype: Any) -> dict[str, np.ndarray]:
    """The ScatterND inputs masking `banned[i]` out of row i (i < rows) with -inf."""
    at = []
    for i, ids in enumerate((banned or [])[:rows]):
        # Unique: ScatterND leaves repeated indices undefined (all -inf here, but still).
        u = np.unique(np.asarray(ids, dtype=np.int64).ravel())
        if u.size:
            at.append(np.stack([np.zeros_like(u), np.full_like(u, i), u], axis=1))
    where = np.concatenate(at) if at else np.zeros((0, 3), dtype=np.int64)
    return {BAN_AT: where, BAN_VALUE: np.full(len(where), -np.inf, dtype=dtype)}


def _add_rows(model: Any) -> bool:
    from onnx import TensorProto, helper

    g = model.graph
    head = next((n for n in g.node if "logits" in n.output), None)
    out = next((o for o in g.output if o.name == "logits"), None)
    if (
        head is None
        or head.op_type not in ("MatMul", "MatMulNBits")
        or out is None
        or len(out.type.tensor_type.shape.dim) != 3
        or any(i.name == ROWS_INPUT for i in g.input)
    ):
        return False
    g.input.append(helper.make_tensor_value_info(ROWS_INPUT, TensorProto.INT64, ["rows"]))
    g.node.append(
        helper.make_node(
            "Gather",
            [head.input[0], ROWS_INPUT],
            ["edge_spec_rows"],
            axis=1,
            name="edge_spec_select_rows",
        )
    )
    head.input[0] = "edge_spec_rows"
    out.type.tensor_type.shape.dim[1].dim_param = "rows"
    return True


def _add_argmax(model: Any) -> bool:
    from onnx import TensorProto, helper

    g = model.graph
    out = next((o for o in g.output if o.name == "logits"), None)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    taken = {v.name for v in (*g.input, *g.output)} & {BAN_AT, BAN_VALUE, ARGMAX}
    # -inf must exist in the logits' type and come from numpy: float32 and float16 only.
    dtype = out.type.tensor_type.elem_type if out is not None else None
    if (
        out is None
        or len(out.type.tensor_type.shape.dim) != 3
        or opset < 11
        or taken
        or dtype not in (TensorProto.FLOAT, TensorProto.FLOAT16)
    ):
        return False
    g.input.extend(
        [
            helper.make_tensor_value_info(BAN_AT, TensorProto.INT64, ["banned", 3]),
            helper.make_tensor_value_info(BAN_VALUE, dtype, ["banned"]),
        ]
    )
    # Ties go to the first index (numpy's rule): ArgMax's default, explicit from opset 12 on.
    first = {"select_last_index": 0} if opset >= 12 else {}
    g.node.extend(
        [
            helper.make_node(
                "ScatterND",
                ["logits", BAN_AT, BAN_VALUE],
                ["edge_spec_masked"],
                name="edge_spec_mask_banned",
            ),
            helper.make_node(
                "ArgMax",
                ["edge_spec_masked"],
                [ARGMAX],
                axis=-1,
                keepdims=0,
                name="edge_spec_take_argmax",
                **first,
            ),
        ]
    )
    dims = [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
        for d in out.type.tensor_type.shape.dim[:2]
    ]
    g.output.append(helper.make_tensor_value_info(ARGMAX, TensorProto.INT64, dims))
    return True

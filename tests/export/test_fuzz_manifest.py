"""Fuzz the bundle manifest loader and path guard with hypothesis.

Property: any manifest text parses to a Manifest or raises a one-line UserError naming the file;
no other exception, and every accepted file path stays inside the bundle. Longer runs:
`EDGE_SPEC_FUZZ_EXAMPLES=50000 python -m pytest tests/export/test_fuzz_manifest.py -q`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from edge_spec.errors import UserError  # noqa: E402
from edge_spec.export.bundle import (  # noqa: E402
    BundleFile,
    Manifest,
    TokenizerInfo,
    manifest_toml,
    parse_manifest,
    safe_path,
)

_ENV = os.environ.get("EDGE_SPEC_FUZZ_EXAMPLES")
FUZZ = settings(
    max_examples=int(_ENV) if _ENV else 400,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
WHERE = Path("/bundle/edge-spec.toml")
GOOD = manifest_toml(
    Manifest(
        files=(
            BundleFile("target.gguf", "target", "gguf", 10, "a" * 64, "Q4_K_M", "src.gguf"),
            BundleFile("onnx/model.onnx", "target", "onnx", 5, "b" * 64, "int8"),
        ),
        tokenizer=TokenizerInfo("0123456789abcdef", 49152, "bpe", 1, 2),
    )
)


def _one_line_error(text: str) -> Manifest | None:
    try:
        return parse_manifest(text, WHERE)
    except UserError as exc:
        msg = str(exc)
        assert msg and "\n" not in msg, msg
        return None


def test_the_written_manifest_reads_back() -> None:
    m = parse_manifest(GOOD, WHERE)
    assert m.files[1].path == "onnx/model.onnx" and m.tokenizer.vocab_size == 49152


LINES = GOOD.splitlines()
EDITS = st.lists(
    st.tuples(
        st.integers(0, len(LINES) - 1),
        st.sampled_from(["drop", "dup", "swap", "junk", "value"]),
        st.text(max_size=12),
    ),
    max_size=4,
)


@FUZZ
@given(edits=EDITS)
@example(edits=[(0, "value", "9223372036854775808")])
@example(edits=[(3, "junk", "[[files]]\npath = '../x'")])
def test_edited_manifests(edits: list[tuple[int, str, str]]) -> None:
    lines = list(LINES)
    for i, op, s in edits:
        i %= len(lines)
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap" and i + 1 < len(lines):
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        elif op == "junk":
            lines.insert(i, s)
        elif op == "value" and "=" in lines[i]:
            lines[i] = lines[i].split("=", 1)[0] + "= " + repr(s)
        if not lines:
            lines = [""]
    _one_line_error("\n".join(lines))


@FUZZ
@given(text=st.text(max_size=400))
def test_arbitrary_text(text: str) -> None:
    _one_line_error(text)


SEGMENTS = st.sampled_from(["a", "..", ".", "", "b.gguf", "/", "\\", "~", "C:", "\x00", "é"])


@FUZZ
@given(parts=st.lists(SEGMENTS, min_size=1, max_size=6), sep=st.sampled_from(["/", "\\", ""]))
@example(parts=["..", "etc", "passwd"], sep="/")
@example(parts=["/etc", "passwd"], sep="/")
@example(parts=["\x00"], sep="/")  # found by this harness: NUL made the OS raise ValueError
def test_safe_path_stays_inside(tmp_path: Path, parts: list[str], sep: str) -> None:
    rel = sep.join(parts)
    try:
        p = safe_path(tmp_path, rel, WHERE)
    except UserError as exc:
        assert "\n" not in str(exc)
        return
    assert p.resolve().is_relative_to(tmp_path.resolve()), (rel, p)

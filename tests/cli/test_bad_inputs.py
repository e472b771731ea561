"""Corrupt and hostile inputs through the real CLI: one `error: ` line, exit 2, nothing left behind.

Every row runs `edge-spec run ... --out OUT/result.txt` through click's CliRunner and checks:
exit code 2, stderr is exactly one line starting with `error: `, no traceback, nothing on
stdout, nothing (not even a temp file) in the output folder, a time bound and a memory bound
(peak RSS growth; only reported for rows that load a real model, whose weights are mapped in).

    python -m pytest tests/cli/test_bad_inputs.py -q -s    # -s prints the table of error lines
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import load_fuzz

from edge_spec.apply.plan import ApplyResult
from edge_spec.cli.main import main
from edge_spec.cli.review import doubt_warnings
from edge_spec.core.chat import CHATML, render
from edge_spec.core.stats import Stats
from edge_spec.errors import UserError

TIME_LIMIT_S = 20.0
RSS_LIMIT_MB = 500.0  # asserted for rows that load no model
HOSTILE_TEMPLATE = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
UPDATE = "x = 1\n"


fz = load_fuzz("fuzz_gguf")
SAMPLE = fz.sample_gguf()


def _gguf_string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def rewrite_header(src: Path, dest: Path, edit: Callable[[bytes], bytes]) -> Path:
    """Copy a GGUF with its metadata edited: `edit` maps the header bytes (up to the end of the
    tensor infos) to new ones; the tensor data is copied as is, re-aligned.

    Splices bytes rather than rewriting through gguf-py: a 100 MB model copies in well under a
    second, where GGUFReader alone takes seconds to walk the vocabulary.
    """
    from edge_spec.store.validate import check_gguf

    header = check_gguf(src)
    with open(src, "rb") as fh:
        head = fh.read(header.data_offset)
        last = _gguf_string(header.tensors[-1].name)  # the last tensor info ends the header
        end = head.rindex(last) + len(last) + 4 + 8 * len(header.tensors[-1].shape) + 4 + 8
        new = edit(head[:end])
        new += bytes(-len(new) % header.alignment)  # the data section starts aligned
        with open(dest, "wb") as out:
            out.write(new)
            while chunk := fh.read(1 << 22):
                out.write(chunk)
    check_gguf(dest)
    return dest


def set_chat_template(template: str) -> Callable[[bytes], bytes]:
    def edit(meta: bytes) -> bytes:
        key = _gguf_string("tokenizer.chat_template")
        at = meta.index(key) + len(key)  # the value's type tag
        vtype, length = struct.unpack_from("<IQ", meta, at)
        assert vtype == 8, vtype  # a string
        return meta[:at] + struct.pack("<I", 8) + _gguf_string(template) + meta[at + 12 + length :]

    return edit


def set_token_text(token_id: int, text: str) -> Callable[[bytes], bytes]:
    def edit(meta: bytes) -> bytes:
        key = _gguf_string("tokenizer.ggml.tokens")
        at = meta.index(key) + len(key)
        vtype, etype, count = struct.unpack_from("<IIQ", meta, at)
        assert vtype == 9 and etype == 8 and token_id < count, (vtype, etype, count)
        pos = at + 16
        for _ in range(token_id):
            pos += 8 + struct.unpack_from("<Q", meta, pos)[0]
        n = struct.unpack_from("<Q", meta, pos)[0]
        return meta[:pos] + _gguf_string(text) + meta[pos + 8 + n :]

    return edit


@dataclass(frozen=True)
class Row:
    """One bad input: how to build the argument list, and what the error must say."""

    id: str
    build: Callable[[Path, pytest.FixtureRequest], list[str]]
    expect: tuple[str, ...]
    real: bool = False


def _model_file(data: bytes) -> Callable[[Path, pytest.FixtureRequest], list[str]]:
    def build(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
        path = tmp / "model.gguf"
        path.write_bytes(data)
        return ["--model", str(path), "--prompt", "hello"]

    return build


def _original(data: bytes) -> Callable[[Path, pytest.FixtureRequest], list[str]]:
    def build(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
        orig, upd = tmp / "orig.py", tmp / "upd.py"
        orig.write_bytes(data)
        upd.write_text(UPDATE)
        return ["--model", "smollm2", "--original", str(orig), "--update", str(upd)]

    return build


def _fifo_model(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    fifo = tmp / "model.gguf"
    os.mkfifo(fifo)
    return ["--model", str(fifo), "--prompt", "hello"]


def _directory_model(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
    (tmp / "models").mkdir()
    return ["--model", str(tmp / "models"), "--prompt", "hello"]


def _mismatched_drafter(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
    from edge_spec.store.models import resolve

    try:
        qwen = resolve("qwen2.5-coder-0.5b-instruct", pull_missing=False)
    except UserError:
        pytest.skip("qwen2.5-coder-0.5b-instruct is not in the store")
    smollm2 = request.getfixturevalue("smollm2_path")
    return [
        "--model",
        str(smollm2),
        "--drafter",
        str(qwen),
        "--prompt",
        "hello",
        "--n-ctx",
        "256",
        "--threads",
        "2",
    ]


def _edited_token_drafter(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
    smollm2 = request.getfixturevalue("smollm2_path")
    drafter = rewrite_header(
        smollm2, tmp / "smollm2-edited.gguf", set_token_text(1000, "<edited-token>")
    )
    return [
        "--model",
        str(smollm2),
        "--drafter",
        str(drafter),
        "--prompt",
        "hello",
        "--n-ctx",
        "256",
        "--threads",
        "2",
    ]


def _pickle_checkpoint(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
    ckpt = tmp / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text('{"model_type": "llama"}')
    # A pickle that would run code if loaded: the check must refuse it without unpickling.
    (ckpt / "pytorch_model.bin").write_bytes(b"\x80\x04cposix\nsystem\n(S'touch pwned'\ntR.")
    return ["--runtime", "torch", "--model", str(ckpt), "--prompt", "hello"]


def _tampered_bundle(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
    from edge_spec.export.bundle import (
        Manifest,
        TokenizerInfo,
        file_entry,
        load_bundle,
        write_manifest,
    )

    request.getfixturevalue("monkeypatch").setenv("EDGE_SPEC_HOME", str(tmp / "home"))
    root = tmp / "bundle"
    root.mkdir()
    model = root / "target-Q8_0.gguf"
    model.write_bytes(SAMPLE)
    write_manifest(
        root,
        Manifest(
            files=(file_entry(root, model.name, "target", "gguf", "Q8_0"),),
            tokenizer=TokenizerInfo("0" * 16, 70, "bpe", 1, 2),
        ),
    )
    load_bundle(root)  # verified once, so the load under test takes the fast (cached) path
    data = bytearray(SAMPLE)
    data[-5] ^= 0x01
    with open(model, "r+b") as fh:  # same size, same inode
        fh.write(data)
    return ["--bundle", str(root), "--prompt", "hello"]


def _onnx_escaping_external_data(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    folder = tmp / "onnx-model"
    folder.mkdir()
    (tmp / "secret.bin").write_bytes(bytes(64))
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4], [0.0] * 4)
    weight.ClearField("float_data")
    weight.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "../secret.bin"), ("offset", "0"), ("length", "16")):
        entry = weight.external_data.add()
        entry.key, entry.value = k, v
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [weight],
    )
    onnx.save(helper.make_model(graph), str(folder / "model.onnx"))
    return ["--runtime", "ort", "--model", str(folder), "--prompt", "hello"]


def _hostile_template(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
    model = request.getfixturevalue("hostile_gguf")
    return ["--model", str(model), "--prompt", "hello", "--n-ctx", "256", "--threads", "2"]


def _oversized_for_context(tmp: Path, request: pytest.FixtureRequest) -> list[str]:
    smollm2 = request.getfixturevalue("smollm2_path")
    orig, upd = tmp / "big.py", tmp / "upd.py"
    orig.write_text("".join(f"value_{i} = {i} * {i}\n" for i in range(400)))
    upd.write_text("value_1 = 2\n")
    return [
        "--model",
        str(smollm2),
        "--original",
        str(orig),
        "--update",
        str(upd),
        "--n-ctx",
        "512",
        "--threads",
        "2",
    ]


_TOKENS_COUNT = fz.value_offset(SAMPLE, "tokenizer.ggml.tokens") + 4  # after the element type
ROWS = [
    Row("empty-file", _model_file(b""), ("model.gguf", "the file is empty")),
    Row("wrong-magic", _model_file(b"GGUX" + SAMPLE[4:]), ("not a GGUF file", "GGUX")),
    Row(
        "html-page",
        _model_file(b"<!DOCTYPE html><html>404</html>\n" * 8),
        ("not a GGUF file", "HTML page"),
    ),
    Row("truncated-counts", _model_file(SAMPLE[:20]), ("model.gguf", "file ends at byte 20")),
    Row(
        "truncated-header",
        _model_file(SAMPLE[:1000]),
        ("model.gguf", "array length 70", "exceeds the file size"),
    ),
    Row(
        "array-len-2^63",
        _model_file(fz.put(SAMPLE, _TOKENS_COUNT, "<Q", 2**63)),
        ("array length 9223372036854775808", "tokenizer.ggml.tokens", "exceeds the file size"),
    ),
    Row(
        "kv-count-2^63",
        _model_file(fz.put(SAMPLE, 16, "<Q", 2**63)),
        ("kv count 9223372036854775808",),
    ),
    Row(
        "tensor-past-eof",
        _model_file(SAMPLE[:-10]),
        ("output_norm.weight", "runs 10 bytes past the end of the file"),
    ),
    Row(
        "random-bytes",
        _model_file(random.Random(1234).randbytes(4096)),
        ("model.gguf", "not a GGUF file"),
    ),
    Row("fifo-model", _fifo_model, ("model.gguf",)),
    Row("directory-model", _directory_model, ("is a directory",)),
    Row(
        "mismatched-vocab-drafter",
        _mismatched_drafter,
        ("does not pair", "special tokens differ", "BOS 1 vs 151643"),
        real=True,
    ),
    Row(
        "drafter-token-text-differs",
        _edited_token_drafter,
        ("does not pair", "token 1000 differs", "'<edited-token>'"),
        real=True,
    ),
    Row("pickle-checkpoint", _pickle_checkpoint, ("pytorch_model.bin", "pickle", "safetensors")),
    Row("bundle-flipped-byte", _tampered_bundle, ("target-Q8_0.gguf does not match its SHA-256",)),
    Row(
        "onnx-external-data-outside", _onnx_escaping_external_data, ("model.onnx", "../secret.bin")
    ),
    Row(
        "hostile-chat-template", _hostile_template, ("unsafe chat template", "__class__"), real=True
    ),
    Row(
        "original-invalid-utf8",
        _original(b"def f():\n    return 'caf\xe9'\n"),
        ("orig.py", "not valid UTF-8", "byte 24"),
    ),
    Row(
        "original-nul-binary",
        _original(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4),
        ("orig.py", "NUL bytes"),
    ),
    Row(
        "original-over-byte-limit",
        _original(b"x = 1\n" * 700_000),
        ("orig.py", "4200000 bytes", "limit"),
    ),
    Row(
        "original-over-context",
        _oversized_for_context,
        ("does not fit the context of 512",),
        real=True,
    ),
]


@pytest.fixture(scope="session")
def hostile_gguf(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("hostile") / "smollm2-hostile-template.gguf"
    t0 = time.perf_counter()
    rewrite_header(smollm2_path, dest, set_chat_template(HOSTILE_TEMPLATE))
    assert time.perf_counter() - t0 < TIME_LIMIT_S
    return dest


def _max_rss_mb() -> float:
    try:
        import resource
    except ImportError:  # not POSIX: no bound checked
        return 0.0
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 2**20


REPORT: list[tuple[str, float, float, str]] = []


@pytest.fixture(scope="module", autouse=True)
def _print_report() -> None:
    yield
    if REPORT:
        print("\n\nrow | seconds | peak RSS growth MB | stderr")
        for rid, dt, drss, line in REPORT:
            print(f"{rid} | {dt:.2f} | {drss:.0f} | {line}")


@pytest.mark.parametrize(
    "row", [pytest.param(r, id=r.id, marks=[pytest.mark.real] if r.real else []) for r in ROWS]
)
def test_bad_input_fails_with_one_error_line(
    row: Row, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    args = row.build(tmp_path, request)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    rss0 = _max_rss_mb()
    t0 = time.perf_counter()
    # --engine model: these rows are about the model path (the merge alone loads no model).
    res = CliRunner().invoke(
        main, ["run", *args, "--engine", "model", "--out", str(out_dir / "result.txt")]
    )
    elapsed = time.perf_counter() - t0
    grew = _max_rss_mb() - rss0
    line = res.stderr.rstrip("\n")
    REPORT.append((row.id, elapsed, grew, line))

    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    assert isinstance(res.exception, SystemExit), res.exception  # nothing else escaped
    assert res.stderr == line + "\n" and "\n" not in line and "\r" not in line, res.stderr
    assert line.startswith("error: "), line
    assert "Traceback" not in res.output and "Traceback" not in res.stderr
    assert res.stdout == ""
    for text in row.expect:
        assert text in line, (text, line)
    assert list(out_dir.iterdir()) == [], "something was left in the output folder"
    assert elapsed < TIME_LIMIT_S, f"{row.id} took {elapsed:.1f} s"
    if not row.real:
        assert grew < RSS_LIMIT_MB, f"{row.id} grew the peak RSS by {grew:.0f} MB"


@pytest.mark.parametrize(
    "real",
    [False, pytest.param(True, marks=pytest.mark.real)],
    ids=["empty-file", "hostile-chat-template"],
)
def test_a_real_process_prints_one_line_too(
    real: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Through `python -m edge_spec`: what llama.cpp itself writes to fd 2 counts here."""
    if real:
        model = request.getfixturevalue("hostile_gguf")
    else:
        model = tmp_path / "empty.gguf"
        model.write_bytes(b"")
    out = tmp_path / "out"
    out.mkdir()
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "edge_spec",
            "run",
            "--model",
            str(model),
            "--prompt",
            "hello",
            "--n-ctx",
            "256",
            "--threads",
            "2",
            "--out",
            str(out / "r.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.perf_counter() - t0 < TIME_LIMIT_S
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert proc.stdout == "" and list(out.iterdir()) == []


# The template renderer directly: the sandbox blocks Python internals with a UserError.
def test_render_blocks_a_hostile_template() -> None:
    with pytest.raises(UserError, match="unsafe") as info:
        render(HOSTILE_TEMPLATE, [{"role": "user", "content": "hi"}])
    assert "\n" not in str(info.value)


def test_render_plain_chatml_still_works() -> None:
    assert render(CHATML, [{"role": "user", "content": "hi"}]).endswith("assistant\n")


# Broken (not hostile) templates: each must be a one-line UserError, never a traceback.
BROKEN_TEMPLATES = [
    pytest.param("{{ messages.foo.bar }}", id="undefined-attribute"),
    pytest.param("{{ raise_exception('no system role') }}", id="raise_exception"),
    pytest.param("{% for m in messages %}", id="syntax-error"),
    pytest.param("{{ 1 / 0 }}", id="zero-division"),
    pytest.param("{{ 1 + 'a' }}", id="type-error"),
    pytest.param("{{ '%s' % (1, 2) }}", id="format-error"),
    pytest.param("{% for x in range(10**9) %}{% endfor %}", id="sandbox-range-limit"),
    pytest.param("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", id="infinite-recursion"),
]


@pytest.mark.parametrize("template", BROKEN_TEMPLATES)
def test_render_refuses_a_broken_template_with_one_line(template: str) -> None:
    with pytest.raises(UserError) as info:
        render(template, [{"role": "user", "content": "hi"}])
    assert "\n" not in str(info.value)


# ---- paths that are not regular files, and outputs that cannot be written -------------------


def _run_cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.stderr


def _one_line(code: int, err: str, *needles: str) -> None:
    assert code == 2, (code, err)
    line = err.strip()
    assert line.startswith("error: ") and "\n" not in line and "Traceback" not in err, err
    for n in needles:
        assert n in line, line


@pytest.mark.parametrize(
    "original, needle",
    [
        ("/dev/zero", "character device"),
        (".", "is a directory"),
    ],
)
def test_non_regular_original_is_named(tmp_path: Path, original: str, needle: str) -> None:
    upd = tmp_path / "u.py"
    upd.write_text(UPDATE)
    if original == ".":
        original = str(tmp_path)
    code, err = _run_cli(
        "run", "--original", original, "--update", str(upd), "--model", "no-such-model"
    )
    _one_line(code, err, needle)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_out_folder_fails_before_any_model(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        _out_error(tmp_path, ro / "sub" / "out.py")
    finally:
        ro.chmod(0o700)


def _out_error(tmp_path: Path, out: Path) -> None:
    orig, upd = tmp_path / "o.py", tmp_path / "u.py"
    orig.write_text("x = 0\n")
    upd.write_text(UPDATE)
    # A model that does not exist: the --out check must come first, or this error would.
    code, err = _run_cli(
        "run",
        "--original",
        str(orig),
        "--update",
        str(upd),
        "--out",
        str(out),
        "--model",
        "no-such-model",
    )
    _one_line(code, err, "cannot write --out")


def test_out_through_a_regular_file_fails_before_any_model(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    _out_error(tmp_path, blocker / "out.py")


def test_out_on_a_virtual_file_system_fails_before_any_model(tmp_path: Path) -> None:
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    _out_error(tmp_path, Path("/proc/self/edge-spec-out.py"))


def test_a_written_file_carries_its_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    # With `--on-suspect write` (or a streamed answer) a refused file still reaches the user:
    # what it does that the snippet does not say is told then too, and only then.
    res = ApplyResult("x\n", "x\n", Stats(), "", suspect=["a finding"], warnings=["a doubt"])
    doubt_warnings(res, wrote=False)
    assert capsys.readouterr().err == ""
    doubt_warnings(res, wrote=True)
    assert capsys.readouterr().err == "warning: a doubt\n"
    res.suspect = []
    doubt_warnings(res, wrote=False)
    assert capsys.readouterr().err == "warning: a doubt\n"

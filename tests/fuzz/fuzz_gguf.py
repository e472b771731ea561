"""GGUF fuzz harness: a tiny stdlib GGUF writer, byte-level mutations and the property to hold.

Shared by tests/export/test_validate.py, tests/export/test_fuzz_gguf.py (hypothesis) and
tests/fuzz/atheris_gguf.py (coverage-guided, for long runs). Written without gguf-py so the
bytes, and where each field lies, are fully under the test's control.

As a script it is a differential fuzzer against llama.cpp's own GGUF parser (needs
llama-cpp-python): `PYTHONPATH=. python tests/fuzz/fuzz_gguf.py 5000 [seed]` lists the
inputs check_gguf accepts but llama.cpp refuses or dies on, and exits 1 if there are any.

Example: `data = sample_gguf()`, then
`check_bytes(mutate(data, [("put8", 16, 2**63)]), Path("/tmp/x.gguf"))`.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from edge_spec.errors import UserError
from edge_spec.store.validate import GGUFHeader, check_gguf

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_FMT = {
    U8: "<B",
    I8: "<b",
    U16: "<H",
    I16: "<h",
    U32: "<I",
    I32: "<i",
    F32: "<f",
    BOOL: "<?",
    U64: "<Q",
    I64: "<q",
    F64: "<d",
}
# ggml type -> (block size, type size), written out here rather than imported from the code
# under test, so a wrong table there cannot make the test agree with itself.
TYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34)}

TOKENS = [f"tok{i}" for i in range(66)] + ["é", "▁the", "<|im_end|>", "日本"]
KVS: list[tuple[str, int, Any]] = [
    ("general.architecture", STRING, "llama"),
    ("general.name", STRING, "tiny test"),
    ("llama.context_length", U32, 2048),
    ("llama.block_count", U32, 1),
    ("general.file_type", U32, 7),
    ("test.i8", I8, -5),
    ("test.u16", U16, 65535),
    ("test.i16", I16, -300),
    ("test.i64", I64, -(2**40)),
    ("test.u64", U64, 2**64 - 1),
    ("test.f64", F64, 0.25),
    ("test.f32", F32, 1.5),
    ("test.bool", BOOL, True),
    ("general.tags", ARRAY, (STRING, ["a", "b c"])),
    ("test.nested", ARRAY, (ARRAY, [(U8, [1, 2]), (U8, [3])])),
    ("tokenizer.ggml.tokens", ARRAY, (STRING, TOKENS)),
    ("tokenizer.ggml.scores", ARRAY, (F32, [float(-i) for i in range(len(TOKENS))])),
    ("tokenizer.ggml.token_type", ARRAY, (I32, [1] * len(TOKENS))),
]
TENSORS = [
    ("token_embd.weight", (32, len(TOKENS)), "Q8_0"),
    ("blk.0.attn_norm.weight", (32,), "F32"),
    ("blk.0.ffn_down.weight", (64, 32), "Q4_0"),
    ("output_norm.weight", (32,), "F16"),
]


def gstr(text: str | bytes) -> bytes:
    """Encode a GGUF string: uint64 length, then the bytes."""
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def gvalue(vtype: int, value: Any) -> bytes:
    """Encode a value without its type tag; arrays are (elem_type, items)."""
    if vtype == STRING:
        return gstr(value)
    if vtype == ARRAY:
        etype, items = value
        return struct.pack("<IQ", etype, len(items)) + b"".join(gvalue(etype, v) for v in items)
    return struct.pack(_FMT[vtype], value)


def nbytes(shape: tuple[int, ...], type_name: str) -> int:
    """Bytes of tensor data for `shape` in ggml type `type_name`."""
    count = 1
    for d in shape:
        count *= d
    _, block, size = TYPES[type_name]
    return count // block * size


def build_gguf(
    kvs: list[tuple[str | bytes, int, Any]] = KVS,
    tensors: list[tuple[str, tuple[int, ...], str]] = TENSORS,
    alignment: int = 32,
    version: int = 3,
) -> bytes:
    """Write a little-endian GGUF with tensors packed, each padded to `alignment`."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)))
    for key, vtype, value in kvs:
        out += gstr(key) + struct.pack("<I", vtype) + gvalue(vtype, value)
    offset, blobs = 0, []
    for name, shape, type_name in tensors:
        out += gstr(name) + struct.pack(
            f"<I{len(shape)}QIQ", len(shape), *shape, TYPES[type_name][0], offset
        )
        size = nbytes(shape, type_name)
        blobs.append(bytes((offset + i) % 251 for i in range(size)))
        offset += -(-size // alignment) * alignment
    out += bytes(-len(out) % alignment)
    for i, blob in enumerate(blobs):
        out += blob + (bytes(-len(blob) % alignment) if i < len(blobs) - 1 else b"")
    return bytes(out)


def sample_gguf() -> bytes:
    """The small valid file every mutation starts from (6 KB, 2.4 KB of it header)."""
    return build_gguf()


def value_offset(data: bytes, key: str) -> int:
    """Offset of the value (after the uint32 type tag) of metadata `key` in `data`."""
    return data.index(gstr(key)) + len(gstr(key)) + 4


def tensor_field(data: bytes, name: str, field: str) -> int:
    """Offset of a tensor info field: 'name', 'n_dims', 'dims', 'type' or 'offset'."""
    start = data.index(gstr(name))
    n_dims_at = start + len(gstr(name))
    (n_dims,) = struct.unpack_from("<I", data, n_dims_at)
    type_at = n_dims_at + 4 + 8 * n_dims
    return {
        "name": start,
        "n_dims": n_dims_at,
        "dims": n_dims_at + 4,
        "type": type_at,
        "offset": type_at + 4,
    }[field]


def put(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    """Overwrite a packed value at `offset` (the file keeps its length)."""
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def mutate(data: bytes, ops: list[tuple[Any, ...]]) -> bytes:
    """Apply mutations: ('flip', at, mask), ('cut', at), ('put4'|'put8', at, value),
    ('insert', at, raw) and ('delete', at, n); positions wrap to the current length."""
    out = bytearray(data)
    for op, at, *arg in ops:
        at = at % (len(out) + 1)
        if op == "flip" and at < len(out):
            out[at] ^= arg[0] % 256 or 1
        elif op == "cut":
            del out[at:]
        elif op in ("put4", "put8"):
            width = 4 if op == "put4" else 8
            out[at : at + width] = (arg[0] % 2 ** (8 * width)).to_bytes(width, "little")
        elif op == "insert":
            out[at:at] = arg[0]
        elif op == "delete":
            del out[at : at + arg[0]]
    return bytes(out)


def check_bytes(data: bytes, path: Path) -> GGUFHeader | None:
    """The property: check_gguf returns a header whose tensors lie in the file, or raises a
    one-line UserError; anything else propagates as a test failure."""
    path.write_bytes(data)
    try:
        header = check_gguf(path)
    except UserError as exc:
        assert "\n" not in str(exc) and "\r" not in str(exc), repr(str(exc))
        return None
    assert header.file_size == len(data)
    assert header.data_offset % header.alignment == 0
    for t in header.tensors:
        assert t.offset % header.alignment == 0
        assert header.data_offset + t.offset <= len(data)
    return header


_LLAMA_WORKER = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
class P(ctypes.Structure): _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]
lib.gguf_init_from_file.restype = ctypes.c_void_p
lib.gguf_init_from_file.argtypes = [ctypes.c_char_p, P]
lib.gguf_free.argtypes = [ctypes.c_void_p]
for line in sys.stdin:
    g = lib.gguf_init_from_file(line.strip().encode(), P(True, None))
    print("ok" if g else "fail", flush=True)
    lib.gguf_free(g) if g else None
"""


def llama_differential(runs: int, seed: int = 0) -> int:
    """Mutate the sample `runs` times; report inputs we accept that llama.cpp's own gguf parser
    (from llama-cpp-python, in a child process so an abort is seen) refuses or dies on."""
    import random
    import subprocess
    import sys
    import tempfile

    import llama_cpp

    lib = str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so")
    start = lambda: subprocess.Popen(  # noqa: E731
        [sys.executable, "-c", _LLAMA_WORKER, lib],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    # llama.cpp has no nested arrays; leave them out so every agreement is a real one.
    base = build_gguf([kv for kv in KVS if kv[0] != "test.nested"])
    rng, worker, gaps = random.Random(seed), start(), 0
    path = Path(tempfile.mkdtemp(prefix="gguf_diff_")) / "m.gguf"
    for i in range(runs):
        ops = [
            (
                rng.choice(["flip", "cut", "put4", "put8", "insert", "delete"]),
                rng.randrange(len(base)) if rng.random() < 0.5 else rng.randrange(600),
                rng.choice([rng.randrange(1, 256), 2**63, 2**64 - 1, 2**32 - 1, len(base)]),
            )
            for _ in range(rng.randint(1, 4))
        ]
        ops = [
            (op, at, rng.randbytes(arg % 16 + 1))
            if op == "insert"
            else (op, at, arg % 16 + 1)
            if op == "delete"
            else (op, at, arg)
            for op, at, arg in ops
        ]
        if check_bytes(mutate(base, ops), path) is None:
            continue
        worker.stdin.write(f"{path}\n")
        worker.stdin.flush()
        verdict = worker.stdout.readline().strip() or f"died (exit {worker.wait()})"
        if verdict != "ok":
            gaps += 1
            (path.parent / f"gap{i}.gguf").write_bytes(path.read_bytes())
            print(f"run {i}: we accept, llama.cpp says {verdict}: {ops}")
            worker = start() if verdict.startswith("died") else worker
    print(f"{runs} runs, {gaps} inputs we accept that llama.cpp refuses; kept in {path.parent}")
    return gaps


if __name__ == "__main__":
    # python tests/fuzz/fuzz_gguf.py [runs] [seed]: differential run against llama.cpp
    import sys

    sys.exit(1 if llama_differential(*(int(a) for a in sys.argv[1:3])) else 0)

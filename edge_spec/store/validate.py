"""Validate untrusted GGUF files with a bounded, streaming header parser (stdlib only).

gguf-py and llama.cpp trust the lengths in a GGUF header, so a crafted file can make them
loop for hours or allocate terabytes. Here every length is checked against the bytes left
in the file before anything is allocated or looped over, and big values are walked, not kept.

For example, `gguf_summary(check_gguf("model.gguf"))["architecture"]` is `'llama'` for
SmolLM2; a bad file raises UserError.
"""

from __future__ import annotations

import codecs
import math
import os
import stat
import struct
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

from edge_spec.errors import UserError

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_ALIGNMENT = 1 << 20
MAX_DIMS = 8  # llama.cpp allows 4 (GGML_MAX_DIMS); 8 leaves room for other GGUF readers
MAX_NESTING = 2  # gguf-py writes arrays of arrays (llama.cpp refuses them); none go deeper
MAX_TENSOR_NAME = 63  # llama.cpp's GGML_MAX_NAME is 64 including the NUL
MAX_KEY = 1024  # real keys are under 64 bytes; with MAX_KV this bounds the memory keys take
MAX_KV = MAX_TENSORS = 1 << 18  # real models have a few thousand; caps memory for the lists
KEEP_ARRAY_MAX = 64
KEEP_BUDGET = 64 << 20  # total bytes of metadata kept; past it, values become Omitted
MAX_ITEMS = 1 << 21  # strings and arrays walked in all (real: < 600k); bounds the time spent
_U64 = struct.Struct("<Q")
_CHUNK = 1 << 20  # strings longer than this are validated in pieces and not kept

# ggml type id -> (name, elements per block, bytes per block), as in ggml-common.h.
# gguf-py 0.19 lists Q8_1 as 40 bytes; ggml static_asserts 36 (two fp16 + 32 int8).
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}
# Named so the error can say the file predates a removal rather than "unknown type".
_REMOVED_TYPES = {
    4: "Q4_2",
    5: "Q4_3",
    31: "Q4_0_4_4",
    32: "Q4_0_4_8",
    33: "Q4_0_8_8",
    36: "IQ4_NL_4_4",
    37: "IQ4_NL_4_8",
    38: "IQ4_NL_8_8",
}

# llama_ftype (general.file_type) id -> name, from llama.h.
FILE_TYPES = {
    i: n
    for i, n in enumerate(
        "ALL_F32 MOSTLY_F16 MOSTLY_Q4_0 MOSTLY_Q4_1 - - - MOSTLY_Q8_0 MOSTLY_Q5_0 MOSTLY_Q5_1 "
        "MOSTLY_Q2_K MOSTLY_Q3_K_S MOSTLY_Q3_K_M MOSTLY_Q3_K_L MOSTLY_Q4_K_S MOSTLY_Q4_K_M "
        "MOSTLY_Q5_K_S MOSTLY_Q5_K_M MOSTLY_Q6_K MOSTLY_IQ2_XXS MOSTLY_IQ2_XS MOSTLY_Q2_K_S "
        "MOSTLY_IQ3_XS MOSTLY_IQ3_XXS MOSTLY_IQ1_S MOSTLY_IQ4_NL MOSTLY_IQ3_S MOSTLY_IQ3_M "
        "MOSTLY_IQ2_S MOSTLY_IQ2_M MOSTLY_IQ4_XS MOSTLY_IQ1_M MOSTLY_BF16 - - - MOSTLY_TQ1_0 "
        "MOSTLY_TQ2_0 MOSTLY_MXFP4_MOE MOSTLY_NVFP4 MOSTLY_Q1_0".split()
    )
    if n != "-"
}

# GGUF value type id -> (name, struct format); string (8) and array (9) are variable-size.
_SCALARS: dict[int, tuple[str, str]] = {
    0: ("u8", "<B"),
    1: ("i8", "<b"),
    2: ("u16", "<H"),
    3: ("i16", "<h"),
    4: ("u32", "<I"),
    5: ("i32", "<i"),
    6: ("f32", "<f"),
    7: ("bool", "<B"),
    10: ("u64", "<Q"),
    11: ("i64", "<q"),
    12: ("f64", "<d"),
}
_STRING, _ARRAY, _U32 = 8, 9, 4
_TYPE_NAMES = {**{k: v[0] for k, v in _SCALARS.items()}, _STRING: "string", _ARRAY: "array"}
# Smallest encoding of one value of each type: what a count is bounded by.
_MIN_SIZE = {**{k: struct.calcsize(v[1]) for k, v in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}
_MIN_KV = 8 + 4 + 1  # empty key, type, one-byte value
_MIN_TENSOR = 8 + 4 + 4 + 8  # empty name, n_dims 0, type, offset
_HINTS = {
    b"PK\x03\x04": "a zip archive; extract the .gguf from it",
    b"vers": "a git-lfs pointer; run `git lfs pull`",
    b"<!DO": "an HTML page; the download failed",
    b"<htm": "an HTML page; the download failed",
    b"tjgg": "an old GGJT model; convert it to GGUF",
    b"lmgg": "an old GGML model; convert it to GGUF",
}


class Omitted(NamedTuple):
    """A value too big to keep in memory: its type ('string', 'array[u32]') and length."""

    type_name: str
    length: int


class TensorInfo(NamedTuple):
    """One tensor's header entry; offset is relative to the data section."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int


@dataclass(frozen=True)
class GGUFHeader:
    """A validated GGUF header: every tensor's data lies inside the file."""

    version: int
    tensor_count: int
    kv_count: int
    metadata: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    alignment: int
    data_offset: int
    file_size: int


def _q(text: str | bytes, limit: int = 80) -> str:
    """Quote untrusted text for a one-line message: repr escapes newlines, long text is cut."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


class _Reader:
    """Bounded little-endian reads over a buffered file, with the position tracked."""

    def __init__(self, fh: BinaryIO, size: int, label: str) -> None:
        self.fh, self.size, self.label, self.pos = fh, size, label, 0
        self.budget, self.items = KEEP_BUDGET, MAX_ITEMS

    def fail(self, reason: str) -> UserError:
        return UserError(
            f"{self.label}: not a valid GGUF file: {reason}; re-download or re-export it"
        )

    def left(self) -> int:
        return self.size - self.pos

    def read(self, n: int, what: str) -> bytes:
        if n > self.size - self.pos:
            raise self.fail(f"file ends at byte {self.size} while reading {what}")
        data = self.fh.read(n)
        if len(data) != n:  # the file shrank after we measured it
            raise self.fail(f"file ends early while reading {what}")
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        if n > self.left():
            raise self.fail(f"file ends at byte {self.size} while reading {what}")
        self.fh.seek(n, os.SEEK_CUR)
        self.pos += n

    def unpack(self, fmt: str, what: str) -> Any:
        return struct.unpack(fmt, self.read(struct.calcsize(fmt), what))[0]

    def length(self, what: str, where: str, unit: int = 1) -> int:
        """Read a uint64 count and refuse it unless `count * unit` bytes are left."""
        n = self.unpack("<Q", f"the {what} {where}")
        if n * unit > self.left():
            raise self.fail(f"{what} {n} {where} exceeds the file size")
        return n

    def walk_strings(self, count: int, where: str) -> None:
        """Check `count` strings in a row without keeping them: the checks of `length` and
        `text` inlined, since this loop walks every token and merge of a vocabulary."""
        what, read, size, unpack = f"the string {where}", self.fh.read, self.size, _U64.unpack
        for _ in range(count):
            if self.pos + 8 > size:
                raise self.fail(f"file ends at byte {size} while reading the string length {where}")
            head = read(8)
            if len(head) != 8:
                raise self.fail(f"file ends early while reading the string length {where}")
            self.pos += 8
            (n,) = unpack(head)
            if n > size - self.pos:
                raise self.fail(f"string length {n} {where} exceeds the file size")
            if n > _CHUNK:
                self.text(n, what)
                continue
            data = read(n)
            if len(data) != n:
                raise self.fail(f"file ends early while reading {what}")
            self.pos += n
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = _q(data[exc.start : exc.end])
                raise self.fail(f"{what} is not valid UTF-8 ({bad})") from None

    def tick(self, n: int = 1) -> None:
        """Count strings and arrays walked, so a crafted header cannot cost unbounded time."""
        self.items -= n
        if self.items < 0:
            raise self.fail(f"more than {MAX_ITEMS} strings and arrays in the header")

    def string(self, where: str) -> str | Omitted:
        """Read a GGUF string; one too big to keep is checked in chunks and kept as Omitted."""
        self.tick()
        n = self.length("string length", where)
        keep = n <= _CHUNK and n + 64 <= self.budget
        if keep:
            self.budget -= n + 64
        text = self.text(n, f"the string {where}")
        return text if keep else Omitted("string", n)

    def text(self, n: int, what: str) -> str | None:
        """Read and UTF-8-check n bytes; past _CHUNK they are checked in pieces, not kept."""
        if n <= _CHUNK:
            return self.utf8(self.read(n, what), what)
        decoder = codecs.getincrementaldecoder("utf-8")()
        for start in range(0, n, _CHUNK):
            chunk = self.read(min(_CHUNK, n - start), what)
            self.utf8(chunk, what, decoder, final=start + _CHUNK >= n)
        return None

    def utf8(self, data: bytes, what: str, decoder: Any = None, final: bool = True) -> str:
        try:
            return decoder.decode(data, final) if decoder else data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(
                f"{what} is not valid UTF-8 ({_q(data[exc.start : exc.end])})"
            ) from None


def _value(r: _Reader, vtype: int, key: str, depth: int) -> Any:
    """Read one value of GGUF type `vtype` belonging to `key`."""
    if vtype in _SCALARS:
        r.budget -= 64
        value = r.unpack(_SCALARS[vtype][1], f"the value of key {_q(key)}")
        return bool(value) if vtype == 7 else value
    if vtype == _STRING:
        return r.string(f"at key {_q(key)}")
    if vtype == _ARRAY:
        return _array(r, key, depth + 1)
    raise r.fail(f"unknown value type {vtype} at key {_q(key)}")


def _array(r: _Reader, key: str, depth: int) -> tuple[Any, ...] | Omitted:
    """Read an array; one longer than KEEP_ARRAY_MAX is walked over and kept as Omitted."""
    where = f"key {_q(key)}" if depth == 1 else f"a nested array at key {_q(key)}"
    etype = r.unpack("<I", f"the array type at {where}")
    if etype not in _TYPE_NAMES:
        raise r.fail(f"unknown array element type {etype} at {where}")
    if etype == _ARRAY and depth >= MAX_NESTING:
        raise r.fail(f"arrays nested deeper than {MAX_NESTING} at key {_q(key)}")
    count = r.length("array length", f"at {where}", _MIN_SIZE[etype])
    if count <= KEEP_ARRAY_MAX and count * 64 <= r.budget:
        return tuple(_value(r, etype, key, depth) for _ in range(count))
    if etype in _SCALARS:
        r.skip(count * _MIN_SIZE[etype], f"the array at {where}")
    elif etype == _STRING:
        r.tick(count)
        r.walk_strings(count, f"in the array at {where}")
    else:
        r.tick(count)
        for _ in range(count):
            _array(r, key, depth + 1)
    return Omitted(f"array[{_TYPE_NAMES[etype]}]", count)


def _header(r: _Reader) -> tuple[int, int, int]:
    """Check magic and version; return (version, tensor_count, kv_count)."""
    if r.size == 0:
        raise r.fail("the file is empty")
    magic = r.read(min(4, r.size), "the magic")
    if magic != GGUF_MAGIC:
        fix = "it looks like " + _HINTS[magic] if magic in _HINTS else "re-download or re-export it"
        raise UserError(f"{r.label}: not a GGUF file (magic {magic!r}); {fix}")
    version = r.unpack("<I", "the version")
    if version not in SUPPORTED_VERSIONS:
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        if swapped in (1, 2, 3):
            raise r.fail(
                f"big-endian GGUF (version reads {version:#010x}); only "
                "little-endian files are supported"
            )
        raise r.fail(f"GGUF version {version} is not supported (need 2 or 3)")
    tensor_count = r.unpack("<Q", "the tensor count")
    kv_count = r.unpack("<Q", "the kv count")
    for what, n, unit, cap in (
        ("kv", kv_count, _MIN_KV, MAX_KV),
        ("tensor", tensor_count, _MIN_TENSOR, MAX_TENSORS),
    ):
        if n * unit > r.left():
            raise r.fail(f"{what} count {n} exceeds the file size")
        if n > cap:
            raise r.fail(f"{what} count {n} exceeds the limit of {cap}")
    if kv_count * _MIN_KV + tensor_count * _MIN_TENSOR > r.left():
        raise r.fail(f"kv count {kv_count} and tensor count {tensor_count} exceed the file size")
    return version, tensor_count, kv_count


def _metadata(r: _Reader, kv_count: int) -> tuple[dict[str, Any], int]:
    """Read the kv pairs; return them and the data alignment."""
    metadata: dict[str, Any] = {}
    for i in range(kv_count):
        n = r.unpack("<Q", f"the key length of kv pair #{i}")
        if n > MAX_KEY:
            raise r.fail(f"the key of kv pair #{i} is {n} bytes long (at most {MAX_KEY})")
        key = r.utf8(r.read(n, f"the key of kv pair #{i}"), f"the key of kv pair #{i}")
        if key in metadata:
            raise r.fail(f"duplicate key {_q(key)}")
        vtype = r.unpack("<I", f"the type of key {_q(key)}")
        if key == "general.alignment" and vtype != _U32:
            # llama.cpp refuses any other type (older builds assert and abort).
            raise r.fail(f"general.alignment has type {_TYPE_NAMES.get(vtype, vtype)}, not u32")
        metadata[key] = _value(r, vtype, key, 0)
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if alignment <= 0 or alignment & (alignment - 1) or alignment > MAX_ALIGNMENT:
        raise r.fail(f"general.alignment {alignment} is not a power of two up to {MAX_ALIGNMENT}")
    return metadata, alignment


def _tensor_info(r: _Reader, i: int) -> tuple[TensorInfo, int]:
    """Read tensor info #i; return it and its data size in bytes."""
    n = r.unpack("<Q", f"the name length of tensor #{i}")
    if n > MAX_TENSOR_NAME:
        raise r.fail(f"the name of tensor #{i} is {n} bytes long (at most {MAX_TENSOR_NAME})")
    name = r.utf8(r.read(n, f"the name of tensor #{i}"), f"the name of tensor #{i}")
    n_dims = r.unpack("<I", f"n_dims of tensor {_q(name)}")
    if n_dims > MAX_DIMS:
        raise r.fail(f"tensor {_q(name)} has {n_dims} dimensions (at most {MAX_DIMS})")
    shape = struct.unpack(f"<{n_dims}Q", r.read(8 * n_dims, f"the shape of tensor {_q(name)}"))
    ggml_type = r.unpack("<I", f"the type of tensor {_q(name)}")
    offset = r.unpack("<Q", f"the offset of tensor {_q(name)}")
    if ggml_type not in GGML_TYPES:
        old = _REMOVED_TYPES.get(ggml_type)
        why = f"removed ggml type {old}" if old else f"unknown ggml type {ggml_type}"
        raise r.fail(f"tensor {_q(name)} has {why}")
    type_name, block, type_size = GGML_TYPES[ggml_type]
    count = math.prod(shape)
    if any(d >= 1 << 63 for d in shape) or count >= 1 << 63:
        raise r.fail(f"tensor {_q(name)} shape {shape} overflows int64")
    if (shape[0] if shape else 1) % block:
        raise r.fail(
            f"tensor {_q(name)} row size {shape[:1]} is not a multiple of the "
            f"{type_name} block size {block}"
        )
    return TensorInfo(name, shape, ggml_type, offset), count // block * type_size


def _tensors(r: _Reader, tensor_count: int, alignment: int) -> tuple[tuple[TensorInfo, ...], int]:
    """Read the tensor infos and check each tensor's data lies aligned inside the file."""
    infos, sizes, names = [], [], set()
    for i in range(tensor_count):
        info, nbytes = _tensor_info(r, i)
        if info.name in names:
            raise r.fail(f"duplicate tensor name {_q(info.name)}")
        names.add(info.name)
        infos.append(info)
        sizes.append(nbytes)
    data_offset = -(-r.pos // alignment) * alignment
    if tensor_count and data_offset > r.size:
        raise r.fail(f"the data section (byte {data_offset}) starts past the end of the file")
    data_size, expected = r.size - data_offset, 0
    for info, nbytes in zip(infos, sizes, strict=True):
        if info.offset % alignment:
            raise r.fail(
                f"tensor {_q(info.name)} offset {info.offset} is not a multiple of "
                f"the alignment {alignment}"
            )
        if info.offset > data_size:
            raise r.fail(
                f"tensor {_q(info.name)} offset {info.offset} is past the end of the "
                f"file (data section is {data_size} bytes)"
            )
        if info.offset + nbytes > data_size:
            raise r.fail(
                f"tensor {_q(info.name)} data ({nbytes} bytes at offset {info.offset}) "
                f"runs {info.offset + nbytes - data_size} bytes past the end of the file"
            )
        if info.offset != expected:  # llama.cpp refuses gaps, overlaps and reordering
            raise r.fail(
                f"tensor {_q(info.name)} offset {info.offset} is not {expected}, "
                "where the previous tensor's data ends"
            )
        expected += -(-nbytes // alignment) * alignment
    return tuple(infos), data_offset


def check_gguf(path: str | os.PathLike[str]) -> GGUFHeader:
    """Parse and bound-check a GGUF header without trusting it; raise UserError if it is bad.

    For SmolLM2-135M, `check_gguf(path).tensor_count` is 272.
    """
    label = str(path) if str(path).isprintable() else repr(str(path))
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block open() forever
            raise UserError(f"{label}: not a regular file")
        with open(path, "rb", buffering=1 << 16) as fh:
            r = _Reader(fh, os.fstat(fh.fileno()).st_size, label)
            version, tensor_count, kv_count = _header(r)
            metadata, alignment = _metadata(r, kv_count)
            tensors, data_offset = _tensors(r, tensor_count, alignment)
    except FileNotFoundError:
        raise UserError(f"{label}: no such file") from None
    except OSError as exc:
        raise UserError(f"{label}: cannot read it: {exc.strerror or exc}") from None
    return GGUFHeader(
        version, tensor_count, kv_count, metadata, tensors, alignment, data_offset, r.size
    )


def gguf_summary(header: GGUFHeader) -> dict[str, Any]:
    """Summarise a checked header for `edge-spec inspect`: architecture, sizes, quant mix."""
    meta = header.metadata
    arch = meta.get("general.architecture")
    tokens = meta.get("tokenizer.ggml.tokens")
    file_type = meta.get("general.file_type")
    mix: dict[str, int] = {}
    for t in header.tensors:
        name = GGML_TYPES[t.ggml_type][0]
        mix[name] = mix.get(name, 0) + 1
    return {
        "architecture": arch,
        "name": meta.get("general.name"),
        "context_length": meta.get(f"{arch}.context_length"),
        "block_count": meta.get(f"{arch}.block_count"),
        "vocab_size": tokens.length
        if isinstance(tokens, Omitted)
        else (len(tokens) if isinstance(tokens, tuple) else None),
        "file_type": FILE_TYPES.get(file_type, file_type) if isinstance(file_type, int) else None,
        "parameter_count": sum(math.prod(t.shape) for t in header.tensors),
        "tensor_count": header.tensor_count,
        "quant_mix": dict(sorted(mix.items(), key=lambda kv: -kv[1])),
        "gguf_version": header.version,
        "file_size": header.file_size,
    }

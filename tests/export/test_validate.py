"""check_gguf: valid files pass with the right metadata; every corrupt one fails fast, in one line."""

from __future__ import annotations

import os
import random
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import load_fuzz

from edge_spec.errors import UserError
from edge_spec.store.validate import GGML_TYPES, Omitted, check_gguf, gguf_summary

fz = load_fuzz("fuzz_gguf")
SAMPLE = fz.sample_gguf()
BIG = 2**63
TOKENS_AT = fz.value_offset(SAMPLE, "tokenizer.ggml.tokens")  # uint32 elem type, then count
LAST = fz.TENSORS[-1][0]
FFN = "blk.0.ffn_down.weight"


def _kv(key: str | bytes, vtype: int, value: object) -> bytes:
    return fz.build_gguf([*fz.KVS[:2], (key, vtype, value)], fz.TENSORS[:1])


def _with_offset(value_of: Callable[[int], int]) -> Callable[[bytes], bytes]:
    """Set the last tensor's offset to value_of(current offset)."""

    def corrupt(data: bytes) -> bytes:
        at = fz.tensor_field(data, LAST, "offset")
        (old,) = struct.unpack_from("<Q", data, at)
        return fz.put(data, at, "<Q", value_of(old))

    return corrupt


def _tensor(field: str, fmt: str, value: int, name: str = LAST) -> Callable[[bytes], bytes]:
    return lambda d: fz.put(d, fz.tensor_field(d, name, field), fmt, value)


def _dims(name: str, *dims: int) -> Callable[[bytes], bytes]:
    """Overwrite a tensor's dims in place (building a file that big would not fit)."""

    def corrupt(data: bytes) -> bytes:
        out = bytearray(data)
        struct.pack_into(f"<{len(dims)}Q", out, fz.tensor_field(data, name, "dims"), *dims)
        return bytes(out)

    return corrupt


def _random(seed: int, prefix: bytes) -> bytes:
    rng = random.Random(seed)
    return prefix + rng.randbytes(rng.randrange(0, 4096))


# (id, make the corrupt bytes from the valid sample, substring the message must contain)
CASES: list[tuple[str, Callable[[bytes], bytes], str]] = [
    ("empty", lambda d: b"", "the file is empty"),
    ("short", lambda d: b"GG", "not a GGUF file (magic b'GG')"),
    ("magic", lambda d: b"GGML" + d[4:], "not a GGUF file (magic b'GGML')"),
    ("zip", lambda d: b"PK\x03\x04" + d[4:], "zip archive"),
    ("lfs-pointer", lambda d: b"version https://git-lfs.github.com/spec/v1\n", "git-lfs"),
    ("magic-only", lambda d: b"GGUF", "file ends at byte 4 while reading the version"),
    ("version-1", lambda d: fz.put(d, 4, "<I", 1), "GGUF version 1 is not supported"),
    ("version-99", lambda d: fz.put(d, 4, "<I", 99), "GGUF version 99 is not supported"),
    ("big-endian", lambda d: fz.put(d, 4, ">I", 3), "big-endian GGUF"),
    ("big-endian-all", lambda d: d[:4] + struct.pack(">IQQ", 3, 4, 18) + d[24:], "big-endian"),
    (
        "tensor-count-2^63",
        lambda d: fz.put(d, 8, "<Q", BIG),
        f"tensor count {BIG} exceeds the file size",
    ),
    ("kv-count-2^63", lambda d: fz.put(d, 16, "<Q", BIG), f"kv count {BIG} exceeds the file size"),
    ("kv-count-2^64-1", lambda d: fz.put(d, 16, "<Q", 2**64 - 1), "kv count"),
    ("kv-count-plus-1", lambda d: fz.put(d, 16, "<Q", len(fz.KVS) + 1), "not a valid GGUF"),
    ("kv-count-fits-size", lambda d: fz.put(d, 16, "<Q", len(d) // 13), "not a valid GGUF"),
    (
        "counts-together",
        lambda d: fz.put(fz.put(d, 8, "<Q", len(d) // 30), 16, "<Q", len(d) // 30),
        "exceed the file size",
    ),
    (
        "key-length-2^63",
        lambda d: fz.put(d, 24, "<Q", BIG),
        f"the key of kv pair #0 is {BIG} bytes long (at most 1024)",
    ),
    ("key-length-1025", lambda d: _kv("k" * 1025, fz.U8, 1), "is 1025 bytes long"),
    (
        "array-length-2^63-1",
        lambda d: fz.put(d, TOKENS_AT + 4, "<Q", BIG - 1),
        f"array length {BIG - 1} at key 'tokenizer.ggml.tokens' exceeds the file size",
    ),
    ("array-length-2^63", lambda d: fz.put(d, TOKENS_AT + 4, "<Q", BIG), "array length"),
    ("array-length-off-by-some", lambda d: fz.put(d, TOKENS_AT + 4, "<Q", 500), "not a valid"),
    ("array-elem-type", lambda d: fz.put(d, TOKENS_AT, "<I", 13), "unknown array element type 13"),
    (
        "token-length-2^63",
        lambda d: fz.put(d, TOKENS_AT + 12, "<Q", BIG),
        f"string length {BIG} in the array at key 'tokenizer.ggml.tokens' exceeds",
    ),
    (
        "string-length-2^63",
        lambda d: fz.put(d, fz.value_offset(d, "general.name"), "<Q", BIG),
        f"string length {BIG} at key 'general.name' exceeds the file size",
    ),
    (
        "value-type",
        lambda d: fz.put(d, fz.value_offset(d, "general.name") - 4, "<I", 13),
        "unknown value type 13 at key 'general.name'",
    ),
    (
        "nested-3-deep",
        lambda d: _kv("x", fz.ARRAY, (fz.ARRAY, [(fz.ARRAY, [(fz.U8, [1])])])),
        "arrays nested deeper than 2 at key 'x'",
    ),
    ("utf8-value", lambda d: _kv("x", fz.STRING, b"ab\xff"), "at key 'x' is not valid UTF-8"),
    ("utf8-key", lambda d: _kv(b"k\xc3", fz.U8, 1), "key of kv pair #2 is not valid UTF-8"),
    (
        "utf8-token",
        lambda d: _kv("t", fz.ARRAY, (fz.STRING, ["a"] * 70 + [b"\xed\xa0\x80"])),
        "in the array at key 't' is not valid UTF-8",
    ),
    ("duplicate-key", lambda d: _kv("general.name", fz.STRING, "y"), "duplicate key"),
    ("alignment-0", lambda d: _kv("general.alignment", fz.U32, 0), "general.alignment 0"),
    ("alignment-3", lambda d: _kv("general.alignment", fz.U32, 3), "not a power of two"),
    ("alignment-2MiB", lambda d: _kv("general.alignment", fz.U32, 1 << 21), "power of two"),
    ("alignment-type", lambda d: _kv("general.alignment", fz.U64, 32), "type u64, not u32"),
    ("tensor-offset-past-eof", _with_offset(lambda o: o + 4096), "is past the end of the file"),
    ("tensor-offset-2^63", _with_offset(lambda o: BIG), "is past the end of the file"),
    ("tensor-data-past-eof", _with_offset(lambda o: o + 32), "bytes past the end of the file"),
    ("misaligned-offset", _with_offset(lambda o: o + 1), "not a multiple of the alignment 32"),
    ("truncated-data", lambda d: d[:-1], "runs 1 bytes past the end of the file"),
    (
        "tensor-gap",
        _tensor("offset", "<Q", 2432, "blk.0.attn_norm.weight"),
        "offset 2432 is not 2400, where the previous tensor's data ends",
    ),
    ("tensor-overlap", _tensor("offset", "<Q", 0, "blk.0.attn_norm.weight"), "is not 2400"),
    ("unknown-ggml-type", _tensor("type", "<I", 99), "unknown ggml type 99"),
    ("removed-ggml-type", _tensor("type", "<I", 31), "removed ggml type Q4_0_4_4"),
    ("n-dims-1000", _tensor("n_dims", "<I", 1000), "has 1000 dimensions (at most 8)"),
    ("n-dims-2^32-1", _tensor("n_dims", "<I", 2**32 - 1), "dimensions"),
    ("dims-overflow", _dims(FFN, 2**32, 2**32), "overflows int64"),
    ("dim-2^64-1", _tensor("dims", "<Q", 2**64 - 1), "overflows int64"),
    (
        "row-not-block-multiple",
        lambda d: fz.build_gguf(tensors=[("t", (33, 2), "Q8_0")]),
        "row size (33,) is not a multiple of the Q8_0 block size 32",
    ),
    (
        "tensor-name-2^63",
        _tensor("name", "<Q", BIG, fz.TENSORS[0][0]),
        f"the name of tensor #0 is {BIG} bytes long",
    ),
    (
        "tensor-name-64",
        lambda d: fz.build_gguf(tensors=[("n" * 64, (4,), "F32")]),
        "is 64 bytes long (at most 63)",
    ),
    (
        "duplicate-tensor",
        lambda d: fz.build_gguf(tensors=[("t", (4,), "F32")] * 2),
        "duplicate tensor name 't'",
    ),
    *[
        (f"random-{seed}", lambda d, s=seed: _random(s, b""), "not a GGUF file")
        for seed in range(5)
    ],
    *[
        (f"random-magic-{seed}", lambda d, s=seed: _random(s, b"GGUF"), "not a valid GGUF")
        for seed in range(5)
    ],
    *[
        (f"random-v3-{seed}", lambda d, s=seed: _random(s, b"GGUF\x03\0\0\0"), "not a valid GGUF")
        for seed in range(5)
    ],
]


def _expect_fail(path: Path, contains: str = "") -> str:
    start = time.perf_counter()
    with pytest.raises(UserError) as info:
        check_gguf(path)
    elapsed = time.perf_counter() - start
    message = str(info.value)
    assert elapsed < 1.0, f"took {elapsed:.2f}s"
    assert "\n" not in message and "\r" not in message, repr(message)
    assert contains in message, message
    return message


@pytest.mark.parametrize("corrupt, contains", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_corrupt_file_fails_fast_in_one_line(tmp_path: Path, corrupt, contains: str) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(corrupt(SAMPLE))
    message = _expect_fail(path, contains)
    assert message.startswith(f"{path}: ")
    if message.startswith(f"{path}: not a valid GGUF file: "):
        assert message.endswith("; re-download or re-export it")


def test_every_truncation_fails(tmp_path: Path) -> None:
    path = tmp_path / "cut.gguf"
    start = time.perf_counter()
    path.write_bytes(SAMPLE)
    header_end = check_gguf(path).data_offset
    # Every cut in the header, where parsing decisions live; a sparser walk through the data.
    for cut in [*range(header_end + 64), *range(header_end + 64, len(SAMPLE), 37)]:
        path.write_bytes(SAMPLE[:cut])
        with pytest.raises(UserError, match="not a"):
            check_gguf(path)
    assert time.perf_counter() - start < 10


def test_valid_sample_metadata_and_tensors(tmp_path: Path) -> None:
    path = tmp_path / "ok.gguf"
    path.write_bytes(SAMPLE)
    h = check_gguf(path)
    assert (h.version, h.tensor_count, h.kv_count, h.alignment) == (3, 4, len(fz.KVS), 32)
    assert h.file_size == len(SAMPLE) and h.data_offset % 32 == 0
    m = h.metadata
    assert m["general.architecture"] == "llama" and m["general.name"] == "tiny test"
    assert (m["test.i8"], m["test.u16"], m["test.i16"]) == (-5, 65535, -300)
    assert (m["test.i64"], m["test.u64"]) == (-(2**40), 2**64 - 1)
    assert (m["test.f64"], m["test.f32"], m["test.bool"]) == (0.25, 1.5, True)
    assert m["general.tags"] == ("a", "b c") and m["test.nested"] == ((1, 2), (3,))
    assert m["tokenizer.ggml.tokens"] == Omitted("array[string]", len(fz.TOKENS))
    assert m["tokenizer.ggml.scores"] == Omitted("array[f32]", len(fz.TOKENS))
    assert [(t.name, t.shape, GGML_TYPES[t.ggml_type][0]) for t in h.tensors] == fz.TENSORS
    offset = 0
    for t, (_, shape, type_name) in zip(h.tensors, fz.TENSORS, strict=True):
        assert t.offset == offset
        offset += -(-fz.nbytes(shape, type_name) // 32) * 32
    assert SAMPLE[h.data_offset : h.data_offset + 4] == bytes(range(4))


def test_summary(tmp_path: Path) -> None:
    path = tmp_path / "ok.gguf"
    path.write_bytes(SAMPLE)
    s = gguf_summary(check_gguf(path))
    assert s["architecture"] == "llama" and s["name"] == "tiny test"
    assert (s["context_length"], s["block_count"]) == (2048, 1)
    assert s["vocab_size"] == len(fz.TOKENS) and s["file_type"] == "MOSTLY_Q8_0"
    assert s["parameter_count"] == 32 * len(fz.TOKENS) + 32 + 64 * 32 + 32
    assert s["quant_mix"] == {"Q8_0": 1, "F32": 1, "Q4_0": 1, "F16": 1}


@pytest.mark.parametrize(
    "variant",
    [
        {"alignment": 64},
        {"alignment": 1},
        {"version": 2},
        {"tensors": []},
        {"kvs": []},
        {"tensors": [("scalar", (), "F32"), ("empty", (0, 7), "F32")]},
    ],
)
def test_valid_variants(tmp_path: Path, variant: dict) -> None:
    variant = dict(variant)
    kvs = variant.pop("kvs", fz.KVS)
    if "alignment" in variant:
        kvs = [*kvs, ("general.alignment", fz.U32, variant["alignment"])]
    path = tmp_path / "ok.gguf"
    path.write_bytes(fz.build_gguf(kvs, **variant))
    h = check_gguf(path)
    assert h.alignment == variant.get("alignment", 32) and h.data_offset % h.alignment == 0


def test_long_string_is_checked_in_chunks_not_kept(tmp_path: Path) -> None:
    # A 2-byte character straddles the 1 MiB chunk boundary: chunking must not reject it.
    text = "a" * ((1 << 20) - 1) + "é" + "b" * 10
    path = tmp_path / "long.gguf"
    path.write_bytes(fz.build_gguf([("long", fz.STRING, text)], []))
    assert check_gguf(path).metadata["long"] == Omitted("string", len(text.encode()))
    path.write_bytes(fz.build_gguf([("long", fz.STRING, text.encode() + b"\xc3")], []))
    _expect_fail(path, "at key 'long' is not valid UTF-8")


def test_item_limit_bounds_the_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("edge_spec.store.validate.MAX_ITEMS", 50)
    path = tmp_path / "many.gguf"
    path.write_bytes(SAMPLE)
    _expect_fail(path, "more than 50 strings and arrays in the header")


def test_keep_budget_omits_values_not_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("edge_spec.store.validate.KEEP_BUDGET", 150)
    path = tmp_path / "ok.gguf"
    path.write_bytes(SAMPLE)
    m = check_gguf(path).metadata
    assert list(m) == [k for k, _, _ in fz.KVS]
    assert m["general.architecture"] == "llama"  # kept while the budget lasted
    assert m["general.tags"] == Omitted("array[string]", 2)


def test_not_a_regular_file_or_missing(tmp_path: Path) -> None:
    _expect_fail(tmp_path, "not a regular file")
    _expect_fail(tmp_path / "missing.gguf", "no such file")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
        _expect_fail(tmp_path / "fifo", "not a regular file")  # must not block in open()


def test_untrusted_names_stay_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad\nname.gguf"
    path.write_bytes(fz.build_gguf([("a\nb", fz.U8, 1), ("a\nb", fz.U8, 1)], []))
    assert "duplicate key 'a\\nb'" in _expect_fail(path)


def test_gguf_writer_output_is_accepted(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    path = tmp_path / "writer.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("from writer")
    writer.add_context_length(128)
    writer.add_token_list([f"t{i}" for i in range(100)])
    writer.add_array("test.ints", [1, 2, 3])
    writer.add_tensor("a", np.arange(12, dtype=np.float32).reshape(3, 4))
    writer.add_tensor("b", np.ones(7, dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    h = check_gguf(path)
    reader = gguf.GGUFReader(str(path))
    assert h.data_offset == reader.data_offset
    assert [(t.name, t.offset) for t in h.tensors] == [
        (t.name, int(t.data_offset) - reader.data_offset) for t in reader.tensors
    ]
    assert [t.shape for t in h.tensors] == [(4, 3), (7,)]  # GGUF stores dims innermost first
    assert h.metadata["general.name"] == "from writer" and h.metadata["test.ints"] == (1, 2, 3)
    assert gguf_summary(h)["vocab_size"] == 100


def test_type_table_matches_gguf_py() -> None:
    constants = pytest.importorskip("gguf.constants")
    for qtype, sizes in constants.GGML_QUANT_SIZES.items():
        if qtype.name == "Q8_1":  # gguf-py says 40; ggml's static_assert says 36
            assert GGML_TYPES[qtype.value] == ("Q8_1", 32, 36)
            continue
        assert GGML_TYPES[qtype.value] == (qtype.name, *sizes)


@pytest.mark.real
def test_real_smollm2_is_accepted_quickly(smollm2_path: Path) -> None:
    start = time.perf_counter()
    summary = gguf_summary(check_gguf(smollm2_path))
    assert time.perf_counter() - start < 2.0  # about 0.15 s: 100k tokenizer strings walked
    assert (summary["architecture"], summary["block_count"]) == ("llama", 30)
    assert (summary["vocab_size"], summary["context_length"]) == (49152, 8192)
    assert summary["file_type"] == "MOSTLY_Q4_1" and summary["quant_mix"]["Q4_1"] == 210
    assert 130e6 < summary["parameter_count"] < 140e6

"""Bundle manifests: schema, paths kept inside the bundle, hash verification (no models needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edge_spec.errors import UserError
from edge_spec.export.bundle import (
    MANIFEST,
    CheckResult,
    Manifest,
    TokenizerInfo,
    bundle_models,
    file_entry,
    load_bundle,
    manifest_toml,
    parse_manifest,
    write_manifest,
)


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The verified-hash cache lives in the store; keep it out of the user's.
    monkeypatch.setenv("EDGE_SPEC_HOME", str(tmp_path / "home"))


def make_bundle(root: Path, onnx: bool = False) -> Manifest:
    root.mkdir(parents=True, exist_ok=True)
    (root / "target-Q8_0.gguf").write_bytes(b"GGUF" + bytes(range(256)) * 40)
    (root / "drafter-Q4_0.gguf").write_bytes(b"GGUF" + b"d" * 5000)
    files = [
        file_entry(root, "target-Q8_0.gguf", "target", "gguf", "Q8_0", "src"),
        file_entry(root, "drafter-Q4_0.gguf", "drafter", "gguf", "Q4_0", "src"),
    ]
    if onnx:
        (root / "target-onnx-int4").mkdir()
        for name in ("model.onnx", "genai_config.json"):
            (root / "target-onnx-int4" / name).write_text(name)
            files.append(file_entry(root, f"target-onnx-int4/{name}", "target", "onnx", "int4"))
    m = Manifest(
        files=tuple(files),
        tokenizer=TokenizerInfo("8e5e36fc059d9bae", 49152, "bpe", 1, 2),
        recommended_profile="cpu",
        created_by="test",
        checks=(CheckResult("target-Q8_0.gguf", "target", "src", 32, 0.96875, 1, 1.5),),
    )
    write_manifest(root, m)
    return m


def test_manifest_round_trips(tmp_path: Path) -> None:
    m = make_bundle(tmp_path / "b", onnx=True)
    text = (tmp_path / "b" / MANIFEST).read_text()
    assert parse_manifest(text, tmp_path / MANIFEST) == m
    assert manifest_toml(m) == text
    b = load_bundle(tmp_path / "b")
    assert b.manifest == m


def test_bundle_models_by_runtime(tmp_path: Path) -> None:
    root = tmp_path / "b"
    make_bundle(root, onnx=True)
    target, drafter, rt = bundle_models(root)
    assert (target, drafter, rt) == (
        root / "target-Q8_0.gguf",
        root / "drafter-Q4_0.gguf",
        "llamacpp",
    )
    target, drafter, rt = bundle_models(root, "onnx")
    assert (target, drafter, rt) == (root / "target-onnx-int4", None, "ort")


def test_missing_format_names_the_fix(tmp_path: Path) -> None:
    make_bundle(tmp_path / "b")
    with pytest.raises(UserError, match="no onnx target.*--format onnx"):
        bundle_models(tmp_path / "b", "ort")


def test_flipped_byte_is_caught_at_load(tmp_path: Path) -> None:
    root = tmp_path / "b"
    make_bundle(root)
    load_bundle(root)  # verified once: the fast path now trusts size + mtime + ctime + inode
    path = root / "target-Q8_0.gguf"
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[1000] ^= 0x01
    with open(path, "r+b") as fh:  # in place: same size and inode
        fh.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # even with the mtime put back
    with pytest.raises(UserError, match="target-Q8_0.gguf does not match its SHA-256"):
        load_bundle(root)


def test_full_verify_rehashes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import edge_spec.export.bundle as bundle_mod

    root = tmp_path / "b"
    make_bundle(root)
    load_bundle(root)
    hashed: list[Path] = []
    real = bundle_mod.sha256_file
    monkeypatch.setattr(bundle_mod, "sha256_file", lambda p: hashed.append(p) or real(p))
    load_bundle(root)
    assert hashed == []  # fast path: nothing re-hashed
    load_bundle(root, verify=True)
    assert len(hashed) == 2


def test_cache_of_a_deleted_bundle_is_pruned(tmp_path: Path) -> None:
    import shutil

    from edge_spec.export.bundle_cache import cache_dir

    gone, kept = tmp_path / "gone", tmp_path / "kept"
    make_bundle(gone)
    load_bundle(gone)
    (cache_dir() / "junk.json").write_text("{not json")
    assert len(list(cache_dir().glob("*.json"))) == 2
    shutil.rmtree(gone)
    make_bundle(kept)
    load_bundle(kept)  # writing this bundle's entry prunes the others
    caches = list(cache_dir().glob("*.json"))
    assert len(caches) == 1 and str(kept.resolve()) in caches[0].read_text()


def test_truncated_and_missing_files(tmp_path: Path) -> None:
    root = tmp_path / "b"
    make_bundle(root)
    with open(root / "drafter-Q4_0.gguf", "ab") as fh:
        fh.write(b"x")
    with pytest.raises(UserError, match="drafter-Q4_0.gguf is 5005 bytes"):
        load_bundle(root)
    (root / "drafter-Q4_0.gguf").unlink()
    with pytest.raises(UserError, match="drafter-Q4_0.gguf is missing"):
        load_bundle(root)


def _edit(root: Path, old: str, new: str) -> None:
    p = root / MANIFEST
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new, 1))


def test_unknown_key_refused(tmp_path: Path) -> None:
    root = tmp_path / "b"
    make_bundle(root)
    _edit(root, 'quant = "Q8_0"', 'quant = "Q8_0"\nexecute = "rm -rf /"')
    with pytest.raises(UserError, match=r"unknown key 'files\[0\]\.execute'"):
        load_bundle(root)


def test_unknown_top_level_key_and_bad_version(tmp_path: Path) -> None:
    root = tmp_path / "b"
    make_bundle(root)
    _edit(root, "format_version = 1", "format_version = 1\nplugins = []")
    with pytest.raises(UserError, match="unknown key 'plugins'"):
        load_bundle(root)
    make_bundle(root)
    _edit(root, "format_version = 1", "format_version = 99")
    with pytest.raises(UserError, match="bundle format 99 is not supported"):
        load_bundle(root)


@pytest.mark.parametrize(
    "bad", ["../outside.gguf", "/etc/passwd", "a/../../x.gguf", "sub\\..\\x.gguf", "./target.gguf"]
)
def test_paths_outside_the_bundle_refused(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "b"
    make_bundle(root)
    _edit(root, 'path = "drafter-Q4_0.gguf"', f'path = "{bad.replace(chr(92), chr(92) * 2)}"')
    with pytest.raises(UserError, match="plain relative path inside the bundle"):
        load_bundle(root)


def test_symlink_out_of_the_bundle_refused(tmp_path: Path) -> None:
    root = tmp_path / "b"
    make_bundle(root)
    outside = tmp_path / "outside.gguf"
    (root / "drafter-Q4_0.gguf").rename(outside)
    (root / "drafter-Q4_0.gguf").symlink_to(outside)
    with pytest.raises(UserError, match="leads outside the bundle"):
        load_bundle(root)


def test_bad_values_name_the_key(tmp_path: Path) -> None:
    root = tmp_path / "b"
    make_bundle(root)
    _edit(root, 'role = "drafter"', 'role = "oracle"')
    with pytest.raises(UserError, match=r"files\[1\]\.role must be one of"):
        load_bundle(root)
    make_bundle(root)
    _edit(root, 'sha256 = "', 'sha256 = "zz')
    with pytest.raises(UserError, match=r"files\[0\]\.sha256 must be 64"):
        load_bundle(root)


def test_not_a_bundle(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a bundle"):
        load_bundle(tmp_path)

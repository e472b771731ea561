"""Bundles: an export folder with model files and an `edge-spec.toml` manifest.

The manifest lists every file with its role, format, quantization, size and SHA-256, the
tokenizer fingerprint and special ids, the round-trip check results, a recommended profile and
a default runtime. Loading checks the schema (unknown keys refused), keeps every path inside the
bundle, and verifies hashes: a file whose size, mtime, ctime and inode match the last verified
state is trusted (the cache lives in `<store>/bundle-cache/`, see `edge_spec.models.store_root`);
anything else, or every file with `verify=True`, is re-hashed.

Example: `target, drafter, runtime = bundle_models("exports/smollm2")`
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from edge_spec.config.profiles import TomlValidator, tomllib
from edge_spec.errors import UserError
from edge_spec.export.bundle_cache import HashCache
from edge_spec.fsutil import sha256_file, write_text
from edge_spec.runtimes import backend_name

MANIFEST = "edge-spec.toml"
FORMAT_VERSION = 1
ROLES = ("target", "drafter", "tokenizer")
FORMATS = ("gguf", "onnx", "tokenizer")
RUNTIMES = ("llamacpp", "ort", "torch")
# The file format each runtime opens (torch dequantizes a GGUF).
RUNTIME_FORMAT = {"llamacpp": "gguf", "ort": "onnx", "torch": "gguf"}


@dataclass(frozen=True)
class BundleFile:
    """`[[files]]`: one file of the bundle; ONNX models are one entry per file of their folder."""

    path: str
    role: str
    format: str
    size: int
    sha256: str
    quant: str = ""
    source: str = ""
    architecture: str = ""  # GGUF general.architecture, or the checkpoint's model_type (ONNX)
    converter: str = ""  # what wrote the file, with versions


@dataclass(frozen=True)
class TokenizerInfo:
    """`[tokenizer]`: what pairing and loaders check the models against."""

    fingerprint: str
    vocab_size: int
    vocab_type: str = ""
    bos_id: int = -1  # -1: none
    eos_id: int = -1


@dataclass(frozen=True)
class CheckResult:
    """`[[checks]]`: the round-trip check of one exported model against its source."""

    path: str
    role: str
    reference: str
    tokens: int
    agreement: float
    first_divergence: int = -1  # -1: none within `tokens`
    max_logit_diff: float = -1.0  # -1: not measured


@dataclass(frozen=True)
class Manifest:
    """A validated `edge-spec.toml`."""

    files: tuple[BundleFile, ...]
    tokenizer: TokenizerInfo
    default_runtime: str = "llamacpp"
    recommended_profile: str = ""
    created_by: str = ""
    checks: tuple[CheckResult, ...] = ()
    format_version: int = FORMAT_VERSION


def file_entry(
    root: Path,
    rel: str,
    role: str,
    fmt: str,
    quant: str = "",
    source: str = "",
    architecture: str = "",
    converter: str = "",
) -> BundleFile:
    """A manifest entry for `root/rel`, hashed now."""
    path = root / rel
    return BundleFile(
        rel,
        role,
        fmt,
        path.stat().st_size,
        sha256_file(path),
        quant,
        source,
        architecture,
        converter,
    )


# ---- writing -------------------------------------------------------------------------------


def _toml(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    # JSON strings are TOML basic strings, except DEL must be escaped in TOML.
    return json.dumps(str(v), ensure_ascii=False).replace("\x7f", "\\u007f")


def _section(obj: object) -> list[str]:
    return [f"{f.name} = {_toml(getattr(obj, f.name))}" for f in fields(obj)]  # type: ignore[arg-type]


def manifest_toml(m: Manifest) -> str:
    """The manifest as TOML text that `parse_manifest` reads back to an equal Manifest."""
    lines = [
        "# edge-spec bundle manifest: edit nothing by hand; re-export instead",
        f"format_version = {m.format_version}",
        f"created_by = {_toml(m.created_by)}",
        f"default_runtime = {_toml(m.default_runtime)}",
        f"recommended_profile = {_toml(m.recommended_profile)}",
        "",
        "[tokenizer]",
        *_section(m.tokenizer),
    ]
    for table, items in (("files", m.files), ("checks", m.checks)):
        for item in items:
            lines += ["", f"[[{table}]]", *_section(item)]
    return "\n".join(lines) + "\n"


def write_manifest(root: Path, m: Manifest) -> Path:
    path = root / MANIFEST
    write_text(path, manifest_toml(m))
    return path


# ---- reading -------------------------------------------------------------------------------


def parse_manifest(text: str, where: Path) -> Manifest:
    """Parse and validate manifest TOML; errors name the key and the file."""
    if tomllib is None:  # pragma: no cover - Python 3.10 without tomli
        raise UserError(
            "reading bundles on Python 3.10 needs the 'tomli' package: pip install tomli"
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where}: not valid TOML ({exc})") from None
    v = TomlValidator(where)
    top = v.table(data, "", {f.name for f in fields(Manifest)})
    version = _need(v, top, "format_version", int)
    if version != FORMAT_VERSION:
        raise UserError(
            f"{where}: bundle format {version} is not supported (this edge-spec "
            f"reads format {FORMAT_VERSION}); re-export the bundle"
        )
    tok = v.table(
        _need(v, top, "tokenizer", dict), "tokenizer", {f.name for f in fields(TokenizerInfo)}
    )
    tokenizer = TokenizerInfo(
        fingerprint=_need(v, tok, "tokenizer.fingerprint", str),
        vocab_size=_need(v, tok, "tokenizer.vocab_size", int, lo=1),
        vocab_type=v.get(tok, "tokenizer.vocab_type", str, ""),
        bos_id=v.get(tok, "tokenizer.bos_id", int, -1, lo=-1),
        eos_id=v.get(tok, "tokenizer.eos_id", int, -1, lo=-1),
    )
    files = tuple(_file(v, t, i) for i, t in enumerate(_list(v, top, "files")))
    checks = tuple(_check(v, t, i) for i, t in enumerate(_list(v, top, "checks", required=False)))
    return Manifest(
        files=files,
        tokenizer=tokenizer,
        checks=checks,
        format_version=version,
        default_runtime=v.choice(top, "default_runtime", RUNTIMES, "llamacpp"),
        recommended_profile=v.get(top, "recommended_profile", str, ""),
        created_by=v.get(top, "created_by", str, ""),
    )


def _need(
    v: Any,
    tbl: dict[str, Any],
    key: str,
    typ: type,
    choices: tuple[str, ...] | None = None,
    **kw: Any,
) -> Any:
    """A required key: missing is an error naming it; then the usual type/range/choice check."""
    short = key.rsplit(".", 1)[-1]
    if short not in tbl:
        raise UserError(f"{v.path}: missing key {key}")
    if typ is dict:
        return tbl[short]
    return v.choice(tbl, key, choices, None) if choices else v.get(tbl, key, typ, None, **kw)


def _list(v: Any, top: dict[str, Any], key: str, required: bool = True) -> list[Any]:
    items = top.get(key, [])
    if not isinstance(items, list) or (required and not items):
        raise UserError(f"{v.path}: {key} must be a non-empty list of tables ([[{key}]])")
    return items


def _file(v: Any, tbl: Any, i: int) -> BundleFile:
    name = f"files[{i}]"
    t = v.table(tbl, name, {f.name for f in fields(BundleFile)})
    sha = _need(v, t, f"{name}.sha256", str)
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise v.fail(f"{name}.sha256", "must be 64 lowercase hex digits")
    return BundleFile(
        path=_need(v, t, f"{name}.path", str),
        role=_need(v, t, f"{name}.role", str, ROLES),
        format=_need(v, t, f"{name}.format", str, FORMATS),
        size=_need(v, t, f"{name}.size", int, lo=0),
        sha256=sha,
        quant=v.get(t, f"{name}.quant", str, ""),
        source=v.get(t, f"{name}.source", str, ""),
        architecture=v.get(t, f"{name}.architecture", str, ""),
        converter=v.get(t, f"{name}.converter", str, ""),
    )


def _check(v: Any, tbl: Any, i: int) -> CheckResult:
    name = f"checks[{i}]"
    t = v.table(tbl, name, {f.name for f in fields(CheckResult)})
    return CheckResult(
        path=_need(v, t, f"{name}.path", str),
        role=_need(v, t, f"{name}.role", str, ROLES[:2]),
        reference=v.get(t, f"{name}.reference", str, ""),
        tokens=v.get(t, f"{name}.tokens", int, 0, lo=0),
        agreement=v.get(t, f"{name}.agreement", float, 0.0, lo=0.0, hi=1.0),
        first_divergence=v.get(t, f"{name}.first_divergence", int, -1, lo=-1),
        max_logit_diff=v.get(t, f"{name}.max_logit_diff", float, -1.0, lo=-1.0),
    )


# ---- loading -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bundle:
    """A loaded bundle: its folder and its verified manifest."""

    root: Path
    manifest: Manifest

    def model_path(self, role: str, fmt: str) -> Path | None:
        """The GGUF file, or the ONNX folder, of `role` in format `fmt`; None if absent."""
        entries = [f for f in self.manifest.files if f.role == role and f.format == fmt]
        if not entries:
            return None
        if fmt == "gguf":
            return self.root / entries[0].path
        return self.root / entries[0].path.split("/")[0]

    def models(self, runtime: str | None = None) -> tuple[Path, Path | None, str]:
        """(target, drafter or None, runtime) for `runtime` (default: the manifest's)."""
        rt = backend_name(runtime or self.manifest.default_runtime)
        fmt = RUNTIME_FORMAT[rt]
        target = self.model_path("target", fmt)
        if target is None:
            have = sorted({f.format for f in self.manifest.files if f.role == "target"})
            raise UserError(
                f"bundle {self.root} has no {fmt} target for runtime {rt} (it has: "
                f"{', '.join(have)}); pick another --runtime or re-export with "
                f"--format {fmt}"
            )
        return target, self.model_path("drafter", fmt), rt


def is_bundle(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / MANIFEST).is_file()


def load_bundle(folder: str | os.PathLike[str], verify: bool = False) -> Bundle:
    """Read, validate and hash-check a bundle; a changed or missing file is a UserError."""
    root = Path(folder).expanduser()
    path = root / MANIFEST
    if not path.is_file():
        raise UserError(f"{root}: not a bundle (no {MANIFEST}); make one with `edge-spec export`")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    m = parse_manifest(text, path)
    _check_layout(root, m, path)
    cache = HashCache(root)
    for f in m.files:
        _verify_file(root, f, cache, verify)
    cache.save()
    return Bundle(root, m)


def safe_path(root: Path, rel: str, where: Path) -> Path:
    """root/rel, refusing absolute paths, `..`, and symlinks that lead out of the bundle."""
    parts = rel.split("/")
    # NUL and control characters: the OS refuses NUL (ValueError), and none belong in a name.
    if (
        not rel
        or "\\" in rel
        or Path(rel).is_absolute()
        or ":" in parts[0]
        or any(p in ("", ".", "..") for p in parts)
        or any(ord(c) < 32 for c in rel)
    ):
        raise UserError(
            f"{where}: file path {rel!r} must be a plain relative path inside "
            "the bundle (no '..', no absolute path, no control characters)"
        )
    full = root / rel
    real_root = root.resolve()
    if not full.resolve().is_relative_to(real_root):
        raise UserError(f"{where}: file {rel!r} leads outside the bundle (symlink?); refusing it")
    return full


def _check_layout(root: Path, m: Manifest, where: Path) -> None:
    seen: set[str] = set()
    for f in m.files:
        safe_path(root, f.path, where)
        if f.path in seen:
            raise UserError(f"{where}: file {f.path!r} is listed twice")
        seen.add(f.path)
        if f.format == "onnx" and "/" not in f.path:
            raise UserError(f"{where}: ONNX file {f.path!r} must sit in a model folder")
    for role in ("target", "drafter"):
        ggufs = [f for f in m.files if f.role == role and f.format == "gguf"]
        onnx_dirs = {f.path.split("/")[0] for f in m.files if f.role == role and f.format == "onnx"}
        if len(ggufs) > 1 or len(onnx_dirs) > 1:
            raise UserError(f"{where}: more than one {role} model per format")
    if not any(f.role == "target" for f in m.files):
        raise UserError(f"{where}: the bundle lists no target model")


def _verify_file(root: Path, f: BundleFile, cache: HashCache, full: bool) -> None:
    path = root / f.path
    if path.is_symlink() or not path.is_file():
        raise UserError(
            f"bundle {root}: {f.path} is missing or not a regular file; re-export the bundle"
        )
    st = path.stat()
    if st.st_size != f.size:
        raise UserError(
            f"bundle {root}: {f.path} is {st.st_size} bytes, the manifest says "
            f"{f.size}: the file was changed or truncated; re-export the bundle"
        )
    key = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, f.sha256]
    if not full and cache.get(f.path) == key:
        return
    if sha256_file(path) != f.sha256:
        raise UserError(
            f"bundle {root}: {f.path} does not match its SHA-256 in {MANIFEST}: "
            "the file was changed or corrupted; re-export the bundle"
        )
    cache.put(f.path, key)


def bundle_models(
    folder: str | os.PathLike[str], runtime: str | None = None, verify: bool = False
) -> tuple[Path, Path | None, str]:
    """(target path, drafter path or None, runtime) of a verified bundle for `runtime`
    (default: the manifest's default_runtime)."""
    return load_bundle(folder, verify).models(runtime)


def tokenizer_info(v: Any) -> TokenizerInfo:
    """The manifest's [tokenizer] table from a VocabInfo."""
    return TokenizerInfo(
        fingerprint=v.fingerprint,
        vocab_size=v.size,
        vocab_type=v.vocab_type,
        bos_id=-1 if v.bos_id is None else v.bos_id,
        eos_id=-1 if v.eos_id is None else v.eos_id,
    )

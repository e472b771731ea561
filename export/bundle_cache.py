"""The verified-hash cache of bundles: one JSON file per bundle folder in `<store>/bundle-cache/`.

An entry maps a bundle file to the (size, mtime, ctime, inode, sha256) it had when last hashed;
ctime cannot be set back, so a matching entry means the file was not touched since. Entries of
bundle folders that no longer exist are pruned whenever a cache is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from edge_spec.fsutil import write_text
from edge_spec.store.models import store_root


def cache_dir() -> Path:
    return store_root() / "bundle-cache"


class HashCache:
    """Last verified state per file of one bundle folder; a read-only store only costs re-hashes."""

    def __init__(self, root: Path) -> None:
        real = str(root.resolve())
        name = hashlib.sha256(real.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        self.path = cache_dir() / f"{name}.json"
        self.dirty = False
        self.root = real
        self.data: dict[str, Any] = {}
        data = _read(self.path)
        if data is not None and data.get("root") == real and isinstance(data.get("files"), dict):
            self.data = data["files"]

    def get(self, rel: str) -> Any:
        return self.data.get(rel)

    def put(self, rel: str, key: list[Any]) -> None:
        self.data[rel] = key
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            write_text(self.path, json.dumps({"root": self.root, "files": self.data}))
        except OSError:
            return
        prune(keep=self.path)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def prune(keep: Path | None = None) -> None:
    """Delete cache files whose bundle folder is gone (or that are unreadable)."""
    try:
        entries = list(cache_dir().glob("*.json"))
    except OSError:
        return
    for path in entries:
        if path == keep:
            continue
        data = _read(path)
        root = data.get("root") if data else None
        if isinstance(root, str) and os.path.isdir(root):
            continue
        with contextlib.suppress(OSError):
            path.unlink()

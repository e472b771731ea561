"""Atomic writes under interruption: SIGINT or SIGTERM mid-write leaves the old file and no temp.

Each case runs a child Python that writes a big file slowly through `fsutil.atomic_open`,
waits until the child is mid-write (its `.NAME.*.part` temp exists), signals it, then checks
that the destination still holds its previous content and that no temp file is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from edge_spec.cli.main import main

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")

OLD = "the previous content\n" * 3

# A slow writer: 64 KiB chunks, 20 ms apart, 640 MiB in all (never finishes within the test).
# SIGINT is put back to Python's default (KeyboardInterrupt): a job started with `&` by a
# non-interactive shell inherits SIGINT ignored, which is not what a user at a terminal has.
WRITER = textwrap.dedent("""
    import signal, sys, time
    from edge_spec.fsutil import atomic_open, install_sigterm_handler

    signal.signal(signal.SIGINT, signal.default_int_handler)
    if sys.argv[2] == "handler":
        install_sigterm_handler()
    with atomic_open(sys.argv[1], "wb") as fh:
        for i in range(10_000):
            fh.write(bytes([i % 256]) * 65536)
            fh.flush()
            if i == 2:
                print("writing", flush=True)
            time.sleep(0.02)
""")

# The same write from inside an `edge-spec` command, so the CLI's own setup is what is tested.
CLI_WRITER = textwrap.dedent("""
    import signal, sys, time
    import click
    from edge_spec.cli.main import main
    from edge_spec.fsutil import atomic_open

    @main.command("slow-write")
    @click.argument("dest")
    def slow_write(dest):
        with atomic_open(dest, "wb") as fh:
            for i in range(10_000):
                fh.write(bytes([i % 256]) * 65536)
                fh.flush()
                if i == 2:
                    print("writing", flush=True)
                time.sleep(0.02)

    main(["slow-write", sys.argv[1]])
""")


def _temps(folder: Path, name: str) -> list[Path]:
    return sorted(folder.glob(f".{name}.*.part"))


def _interrupt(tmp_path: Path, script: str, sig: int, *args: str) -> tuple[int, str, Path]:
    """Start the writer, signal it mid-write, return (exit code, stderr, destination)."""
    dest = tmp_path / "big.bin"
    dest.write_text(OLD)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(dest), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = proc.stdout.readline()  # the child prints after its third chunk
        assert line.strip() == "writing", (line, proc.stderr.read())
        temps = _temps(tmp_path, dest.name)
        assert len(temps) == 1 and temps[0].stat().st_size >= 3 * 65536, temps
        assert dest.read_text() == OLD  # not replaced while the write is in progress
        t0 = time.perf_counter()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=15)
        assert time.perf_counter() - t0 < 10, "the writer took too long to stop"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, err, dest


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_atomic_write_keeps_old_file_and_no_temp(tmp_path: Path, sig: int) -> None:
    rc, err, dest = _interrupt(tmp_path, WRITER, sig, "handler")
    if sig == signal.SIGINT:
        # An unhandled KeyboardInterrupt: Python exits by re-raising SIGINT on itself.
        assert rc in (-signal.SIGINT, 130, 1) and "KeyboardInterrupt" in err, (rc, err)
    else:
        assert rc == 143, (rc, err)
    assert dest.read_text() == OLD
    assert _temps(tmp_path, dest.name) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.bin"]


def test_without_the_handler_sigterm_leaves_the_temp_behind(tmp_path: Path) -> None:
    """The control case: Python's default SIGTERM does not unwind, so the temp file stays.

    This is why the CLI installs install_sigterm_handler(); if this ever starts passing
    cleanup on its own, the handler is no longer needed.
    """
    rc, _, dest = _interrupt(tmp_path, WRITER, signal.SIGTERM, "default")
    assert rc == -signal.SIGTERM
    assert dest.read_text() == OLD
    assert len(_temps(tmp_path, dest.name)) == 1


def test_cli_sigterm_mid_write_exits_143_and_cleans_up(tmp_path: Path) -> None:
    rc, err, dest = _interrupt(tmp_path, CLI_WRITER, signal.SIGTERM)
    assert rc == 143, (rc, err)
    assert "Traceback" not in err, err
    assert dest.read_text() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.bin"]


def test_cli_sigint_mid_write_exits_130_and_cleans_up(tmp_path: Path) -> None:
    script = CLI_WRITER.replace(
        "import click", "import click\nsignal.signal(signal.SIGINT, signal.default_int_handler)"
    )
    rc, err, dest = _interrupt(tmp_path, script, signal.SIGINT)
    assert rc == 130 and err.strip() == "interrupted", (rc, err)
    assert dest.read_text() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.bin"]


def test_cli_installs_the_handler_only_while_a_command_runs() -> None:
    """In-process (CliRunner, a server host): the handler is put back when the command ends."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("this process already has a SIGTERM handler")
    seen = []

    @main.command("probe-sigterm")
    def probe() -> None:
        seen.append(signal.getsignal(signal.SIGTERM))

    try:
        res = CliRunner().invoke(main, ["probe-sigterm"])
    finally:
        main.commands.pop("probe-sigterm", None)
    assert res.exit_code == 0, res.output
    assert seen and seen[0] not in (signal.SIG_DFL, signal.SIG_IGN, None)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_install_sigterm_handler_respects_an_existing_handler() -> None:
    from edge_spec.fsutil import install_sigterm_handler

    def mine(signum: int, frame: object) -> None:  # pragma: no cover - never delivered
        pass

    old = signal.signal(signal.SIGTERM, mine)
    try:
        restore = install_sigterm_handler()
        assert signal.getsignal(signal.SIGTERM) is mine
        restore()
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, old)


def test_install_sigterm_handler_is_a_no_op_off_the_main_thread() -> None:
    import threading

    from edge_spec.fsutil import install_sigterm_handler

    before = signal.getsignal(signal.SIGTERM)
    out: list = []
    t = threading.Thread(target=lambda: out.append(install_sigterm_handler()))
    t.start()
    t.join()
    assert signal.getsignal(signal.SIGTERM) is before
    out[0]()  # the restore function is harmless too
    assert signal.getsignal(signal.SIGTERM) is before

"""This machine, and the profile `edge-spec calibrate` measured on it.

A verify-cost table measured elsewhere misprices draft lengths here (which forward size is
cheapest per token differs between CPUs, and between days on one VM), so when no profile is
named, the engine takes the newest profile in the store that was calibrated on this machine for
the same target and backend: calibrating once is enough for `run`, `serve` and `bench` to use it.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

from edge_spec.config.profiles import Profile, load_profile, user_dir
from edge_spec.config.settings import canonical_backend
from edge_spec.errors import UserError

# `--profile none`: the built-in defaults, even where a calibrated profile exists.
NO_PROFILE = "none"
BUILTIN_PROFILE = "built-in defaults"


def machine_description(n_gpu_layers: int = 0) -> str:
    """CPU model and core count (from /proc/cpuinfo where there is one)."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    text = f"{model}, {os.cpu_count() or 1} cores ({platform.machine()}, {platform.system()})"
    if n_gpu_layers:
        text += f", n_gpu_layers={n_gpu_layers}"
    return text


@dataclass(frozen=True)
class Calibrated:
    """A store profile measured on this machine for the model about to run."""

    profile: Profile
    path: Path

    def label(self) -> str:
        """Which file and from when, for stderr and reports."""
        return f"{self.path} (calibrated on this machine {self.profile.costs.date})"


def _same_model(a: str, b: str) -> bool:
    if a == b:
        return True
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    try:
        return pa.exists() and pb.exists() and pa.resolve() == pb.resolve()
    except OSError:
        return False


def calibrated_here(target: str, backend: str, n_gpu_layers: int = 0) -> Calibrated | None:
    """The newest store profile calibrated here for `target` on `backend`, else None.

    A store profile that does not load is skipped, not an error: the user did not name it.
    """
    folder = user_dir()
    if not folder.is_dir():
        return None
    here = machine_description(n_gpu_layers)
    want = canonical_backend(backend) or backend
    best: tuple[str, float, Calibrated] | None = None
    for path in sorted(folder.glob("*.toml")):
        try:
            prof = load_profile(path)
            mtime = path.stat().st_mtime
        except (UserError, OSError):
            continue
        c = prof.costs
        got = canonical_backend(prof.runtime.backend) or prof.runtime.backend
        if (
            c.source != "measured"
            or c.machine != here
            or got != want
            or not _same_model(c.target, target)
        ):
            continue
        key = (c.date, mtime)
        if best is None or key > best[:2]:
            best = (c.date, mtime, Calibrated(prof, path))
    return best[2] if best else None

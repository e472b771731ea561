"""Hardware profiles: runtime settings, drafter choice, controller bounds and a verify-cost table.

A profile is a TOML file, shipped in `profiles/` (the package `edge_spec.profiles`) and loaded by
name, or any file loaded by path; `edge-spec calibrate` writes one measured on this machine.
Every key is checked: an unknown key or a wrong type is a UserError naming the key and the file.

>>> prof = load_profile("cpu-2core")
>>> prof.costs.verify_ms[1]          # ms of one target forward of 1 token   # doctest: +SKIP
38.5
>>> cfg = prof.engine_config()       # EngineConfig with threads, drafter, controller filled in
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edge_spec.adapt import ControllerConfig
from edge_spec.errors import UserError

if TYPE_CHECKING:
    from edge_spec.engine import EngineConfig

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ModuleNotFoundError:  # pragma: no cover - depends on the environment
        tomllib = None  # type: ignore[assignment]

BACKENDS = ("llamacpp", "ort", "onnx", "torch")  # "onnx" is an alias of "ort"
DRAFTER_KINDS = ("hybrid", "reference", "model", "none")
SOURCES = ("measured", "estimated")
# The verify-cost table must cover at least these draft+1 sizes.
REQUIRED_POINTS = (1, 2, 4, 8, 16, 32, 64, 128)
MAX_POINT = 128
_USER_DIR = "profiles"


@dataclass(frozen=True)
class RuntimeSection:
    """`[runtime]`: how to open the models."""

    backend: str = "llamacpp"
    threads: int = 0  # 0: all cores
    n_gpu_layers: int = 0  # -1: all layers
    n_ctx: int = 8192
    n_batch: int = 512
    onnx_provider: str = "CPUExecutionProvider"


@dataclass(frozen=True)
class DrafterSection:
    """`[drafter]`: which drafter and which drafter model."""

    kind: str = "hybrid"
    model: str = ""  # catalogue name or path; "" = the demo drafter with the demo target
    quant: str = ""
    p_min: float = 0.6


@dataclass(frozen=True)
class ControllerSection:
    """`[controller]`: bounds and smoothing of the draft-length controller."""

    k_max: int = 64
    prior_accept: float = 0.7
    prior_weight: float = 4.0
    decay: float = 0.98
    cost_smoothing: float = 0.3
    probe_every: int = 24


@dataclass(frozen=True)
class CostsSection:
    """`[costs]`: the verify-cost table {n tokens: ms} and the drafter/prefill costs."""

    verify_ms: Mapping[int, float]
    drafter_ratio: float
    prefill_ms_per_token: float
    source: str
    machine: str = ""
    date: str = ""
    method: str = ""
    target: str = ""  # the target model the costs were measured or estimated for

    def per_token(self, n: int) -> float:
        return self.verify_ms[n] / n


@dataclass(frozen=True)
class Profile:
    """A loaded, validated profile; `path` is the file it came from."""

    name: str
    costs: CostsSection
    description: str = ""
    runtime: RuntimeSection = field(default_factory=RuntimeSection)
    drafter: DrafterSection = field(default_factory=DrafterSection)
    controller: ControllerSection = field(default_factory=ControllerSection)
    path: Path | None = field(default=None, compare=False)

    def controller_config(self, base: ControllerConfig | None = None) -> ControllerConfig:
        """The controller settings of this profile over `base` (default: built-in defaults)."""
        base = base or ControllerConfig()
        c = self.controller
        ratios = dict(base.draft_cost_ratio)
        ratios.update(reference=0.001, model=self.costs.drafter_ratio)
        return replace(base, k_max=c.k_max, prior_accept=c.prior_accept,
                       prior_weight=c.prior_weight, decay=c.decay,
                       cost_smoothing=c.cost_smoothing, probe_every=c.probe_every,
                       verify_ms=dict(self.costs.verify_ms), draft_cost_ratio=ratios)

    def engine_config(self, base: EngineConfig | None = None) -> EngineConfig:
        """An EngineConfig with this profile's runtime, drafter and controller over `base`."""
        from edge_spec.engine import EngineConfig
        from edge_spec.runtimes import backend_name

        base = base or EngineConfig()
        r = self.runtime
        return replace(base, runtime=backend_name(r.backend), onnx_provider=r.onnx_provider,
                       n_ctx=r.n_ctx, n_threads=r.threads, n_gpu_layers=r.n_gpu_layers,
                       n_batch=r.n_batch, draft=self.drafter.kind, p_min=self.drafter.p_min,
                       controller=self.controller_config(base.controller))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (table keys become strings)."""
        d: dict[str, Any] = {"name": self.name, "description": self.description}
        for sec in ("runtime", "drafter", "controller", "costs"):
            obj = getattr(self, sec)
            d[sec] = {f.name: getattr(obj, f.name) for f in fields(obj)}
        d["costs"]["verify_ms"] = {str(n): ms for n, ms in sorted(self.costs.verify_ms.items())}
        d["path"] = str(self.path) if self.path else None
        return d

    def to_toml(self) -> str:
        """The profile as TOML text that `load_profile` reads back to an equal Profile."""
        lines = [f"name = {_toml_value(self.name)}",
                 f"description = {_toml_value(self.description)}"]
        for sec in ("runtime", "drafter", "controller", "costs"):
            obj = getattr(self, sec)
            lines += ["", f"[{sec}]"]
            lines += [f"{f.name} = {_toml_value(getattr(obj, f.name))}"
                      for f in fields(obj) if f.name != "verify_ms"]
        lines += ["", "[costs.verify_ms]  # n tokens in one target forward -> ms"]
        lines += [f"{n} = {_toml_value(ms)}" for n, ms in sorted(self.costs.verify_ms.items())]
        return "\n".join(lines) + "\n"


def _finite(v: float) -> float | None:
    """float(v) if it is a finite float (TOML integers can be arbitrarily large), else None."""
    import math

    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(float(round(v, 4)))
    # JSON strings are TOML basic strings, except DEL must be escaped in TOML.
    return json.dumps(str(v), ensure_ascii=False).replace("\x7f", "\\u007f")


# ---- loading -------------------------------------------------------------------------------

def shipped_dir() -> Path:
    """The folder of the profiles that ship with edge-spec."""
    import edge_spec.profiles as pkg

    return Path(pkg.__file__).resolve().parent


def user_dir() -> Path:
    """Where `edge-spec calibrate` writes by default: the store's `profiles/` folder."""
    from edge_spec.models import store_root

    return store_root() / _USER_DIR


def profile_names() -> list[tuple[str, Path]]:
    """(name, path) of every shipped profile, then user profiles whose name is not shipped."""
    out: dict[str, Path] = {}
    for folder in (shipped_dir(), user_dir()):
        if folder.is_dir():
            for p in sorted(folder.glob("*.toml")):
                out.setdefault(p.stem, p)
    return list(out.items())


def find_profile(name_or_path: str | os.PathLike[str]) -> Path:
    """A shipped or user profile name, or a path to a TOML file -> the file's path."""
    text = os.fspath(name_or_path)
    path = Path(text).expanduser()
    if path.is_file():
        return path
    looks_like_path = os.sep in text or "/" in text or text.endswith(".toml")
    if not looks_like_path:
        for name, p in profile_names():
            if name == text.strip().lower():
                return p
    if looks_like_path:
        raise UserError(f"profile file not found: {text}")
    names = ", ".join(n for n, _ in profile_names())
    raise UserError(f"unknown profile {text!r}: pass a .toml path or one of: {names}")


def load_profile(name_or_path: str | os.PathLike[str]) -> Profile:
    """Load and validate a profile by shipped/user name or path."""
    path = find_profile(name_or_path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read profile {path}: {exc}") from None
    return parse_profile(text, path)


def parse_profile(text: str, path: str | os.PathLike[str] = "<string>") -> Profile:
    """Parse and validate profile TOML text; `path` names the file in error messages."""
    if tomllib is None:  # pragma: no cover - Python 3.10 without tomli
        raise UserError("reading profiles on Python 3.10 needs the 'tomli' package: pip install tomli")
    where = Path(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where}: not valid TOML ({exc})") from None
    v = TomlValidator(where)
    top = v.table(data, "", {"name", "description", "runtime", "drafter", "controller", "costs"})
    name = v.get(top, "name", str, where.stem)
    description = v.get(top, "description", str, "")

    rt = v.table(top.get("runtime", {}), "runtime", {f.name for f in fields(RuntimeSection)})
    d = RuntimeSection()
    runtime = RuntimeSection(
        backend=v.choice(rt, "runtime.backend", BACKENDS, d.backend),
        threads=v.get(rt, "runtime.threads", int, d.threads, lo=0),
        n_gpu_layers=v.get(rt, "runtime.n_gpu_layers", int, d.n_gpu_layers, lo=-1),
        n_ctx=v.get(rt, "runtime.n_ctx", int, d.n_ctx, lo=64),
        n_batch=v.get(rt, "runtime.n_batch", int, d.n_batch, lo=1),
        onnx_provider=v.get(rt, "runtime.onnx_provider", str, d.onnx_provider),
    )

    dr = v.table(top.get("drafter", {}), "drafter", {f.name for f in fields(DrafterSection)})
    dd = DrafterSection()
    drafter = DrafterSection(
        kind=v.choice(dr, "drafter.kind", DRAFTER_KINDS, dd.kind),
        model=v.get(dr, "drafter.model", str, dd.model),
        quant=v.get(dr, "drafter.quant", str, dd.quant),
        p_min=v.get(dr, "drafter.p_min", float, dd.p_min, lo=0.0, hi=1.0),
    )

    ct = v.table(top.get("controller", {}), "controller",
                 {f.name for f in fields(ControllerSection)})
    cd = ControllerSection()
    controller = ControllerSection(
        k_max=v.get(ct, "controller.k_max", int, cd.k_max, lo=1, hi=512),
        prior_accept=v.get(ct, "controller.prior_accept", float, cd.prior_accept, lo=0.0, hi=1.0),
        prior_weight=v.get(ct, "controller.prior_weight", float, cd.prior_weight, lo=0.0),
        decay=v.get(ct, "controller.decay", float, cd.decay, lo=0.0, hi=1.0),
        cost_smoothing=v.get(ct, "controller.cost_smoothing", float, cd.cost_smoothing,
                             lo=0.0, hi=1.0),
        probe_every=v.get(ct, "controller.probe_every", int, cd.probe_every, lo=1),
    )

    if "costs" not in top:
        raise UserError(f"{where}: missing section [costs] (verify_ms, drafter_ratio, "
                        "prefill_ms_per_token, source)")
    co = v.table(top["costs"], "costs", {f.name for f in fields(CostsSection)})
    for key in ("verify_ms", "drafter_ratio", "prefill_ms_per_token", "source"):
        if key not in co:
            raise UserError(f"{where}: missing key costs.{key}")
    costs = CostsSection(
        verify_ms=v.verify_table(co["verify_ms"]),
        drafter_ratio=v.get(co, "costs.drafter_ratio", float, None, lo=0.0),
        prefill_ms_per_token=v.get(co, "costs.prefill_ms_per_token", float, None, lo=0.0,
                                   lo_open=True),
        source=v.choice(co, "costs.source", SOURCES, None),
        machine=v.get(co, "costs.machine", str, ""),
        date=v.get(co, "costs.date", str, ""),
        method=v.get(co, "costs.method", str, ""),
        target=v.get(co, "costs.target", str, ""),
    )
    return Profile(name=name, description=description, runtime=runtime, drafter=drafter,
                   controller=controller, costs=costs, path=where)


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string"}


class TomlValidator:
    """Type and range checks whose errors name the key and the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, msg: str) -> UserError:
        return UserError(f"{self.path}: {key} {msg}")

    def table(self, obj: object, name: str, allowed: set[str]) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise self.fail(name, "must be a table ([section])")
        for key in obj:
            if key not in allowed:
                full = f"{name}.{key}" if name else key
                raise UserError(f"{self.path}: unknown key {full!r}"
                                f"{f' in [{name}]' if name else ''}; "
                                f"known keys: {', '.join(sorted(allowed))}")
        return obj

    def get(self, tbl: dict[str, Any], key: str, typ: type, default: Any, *,
            lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> Any:
        short = key.rsplit(".", 1)[-1]
        if short not in tbl:
            return default
        val = tbl[short]
        ok = (not isinstance(val, bool)) and (
            isinstance(val, (int, float)) if typ is float else isinstance(val, typ))
        if not ok:
            raise self.fail(key, f"must be {_TYPE_NAMES[typ]}, not {type(val).__name__} "
                                 f"({val!r})")
        if typ is float:
            val = _finite(val)
            if val is None:
                raise self.fail(key, f"must be a finite number, got {tbl[short]!r}")
        if lo is not None and (val < lo or (lo_open and val == lo)):
            raise self.fail(key, f"must be {'>' if lo_open else '>='} {lo}, got {val!r}")
        if hi is not None and val > hi:
            raise self.fail(key, f"must be <= {hi}, got {val!r}")
        return val

    def choice(self, tbl: dict[str, Any], key: str, options: tuple[str, ...],
               default: str | None) -> str:
        val = self.get(tbl, key, str, default)
        if val not in options:
            raise self.fail(key, f"must be one of {', '.join(options)}, got {val!r}")
        return val

    def verify_table(self, obj: object) -> dict[int, float]:
        if not isinstance(obj, dict):
            raise self.fail("costs.verify_ms", "must be a table of n = ms "
                                               "([costs.verify_ms] with 1 = 38.5, ...)")
        out: dict[int, float] = {}
        for raw, ms in obj.items():
            key = f"costs.verify_ms.{raw}"
            try:
                n = int(raw)
            except ValueError:
                raise UserError(f"{self.path}: unknown key {key!r}: keys of costs.verify_ms "
                                f"are token counts 1..{MAX_POINT}") from None
            if not 1 <= n <= MAX_POINT:
                raise self.fail(key, f"is outside 1..{MAX_POINT}")
            if isinstance(ms, bool) or not isinstance(ms, (int, float)):
                raise self.fail(key, f"must be a number (ms), not {type(ms).__name__} ({ms!r})")
            val = _finite(ms)
            if val is None or not val > 0:
                raise self.fail(key, f"must be a finite number > 0 ms, got {ms!r}")
            out[n] = val
        missing = [n for n in REQUIRED_POINTS if n not in out]
        if missing:
            raise self.fail("costs.verify_ms", "needs at least the points "
                            f"{', '.join(map(str, REQUIRED_POINTS))}; missing "
                            f"{', '.join(map(str, missing))}")
        return dict(sorted(out.items()))

"""Hardware profiles: runtime settings, drafter choice, controller bounds and a verify-cost table.

A profile is a TOML file, shipped in `profiles/` (the package `edge_spec.profiles`) and loaded by
name, or any file loaded by path; `edge-spec calibrate` writes one measured on this machine.
Its `[runtime]`, `[drafter]` and `[controller]` tables are the settings tree's sections
(`edge_spec.config.settings`), so every default and bound comes from there. Every key is checked:
an unknown key or a wrong type is a UserError naming the key and the file.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import edge_spec.profiles as shipped_pkg
from edge_spec.config.settings import (
    COST_SOURCES,
    MAX_POINT,
    REQUIRED_POINTS,
    ControllerSettings,
    DrafterSettings,
    EngineConfig,
    RuntimeSettings,
    canonical_backend,
    toml_fields,
)
from edge_spec.errors import UserError
from edge_spec.store.models import store_root

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ModuleNotFoundError:  # pragma: no cover - depends on the environment
        tomllib = None  # type: ignore[assignment]

SOURCES = COST_SOURCES
_USER_DIR = "profiles"
_SECTIONS: dict[str, type] = {
    "runtime": RuntimeSettings,
    "drafter": DrafterSettings,
    "controller": ControllerSettings,
}


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
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    drafter: DrafterSettings = field(default_factory=DrafterSettings)
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    path: Path | None = field(default=None, compare=False)

    def controller_config(self) -> ControllerSettings:
        """The controller settings with this profile's cost table and drafter cost."""
        ratios = dict(self.controller.draft_cost_ratio)
        ratios["model"] = self.costs.drafter_ratio
        return replace(
            self.controller, verify_ms=dict(self.costs.verify_ms), draft_cost_ratio=ratios
        )

    def engine_config(self, base: EngineConfig | None = None) -> EngineConfig:
        """`base` (default: built-in defaults) with this profile's sections."""
        base = base or EngineConfig()
        backend = canonical_backend(self.runtime.backend) or self.runtime.backend
        return replace(
            base,
            runtime=replace(self.runtime, backend=backend),
            drafter=self.drafter,
            controller=self.controller_config(),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (table keys become strings)."""
        d: dict[str, Any] = {"name": self.name, "description": self.description}
        for sec, cls in _SECTIONS.items():
            d[sec] = {f.name: getattr(getattr(self, sec), f.name) for f in toml_fields(cls)}
        d["costs"] = {f.name: getattr(self.costs, f.name) for f in fields(CostsSection)}
        d["costs"]["verify_ms"] = {str(n): ms for n, ms in sorted(self.costs.verify_ms.items())}
        d["path"] = str(self.path) if self.path else None
        return d

    def to_toml(self) -> str:
        """The profile as TOML text that `load_profile` reads back to an equal Profile."""
        lines = [
            f"name = {_toml_value(self.name)}",
            f"description = {_toml_value(self.description)}",
        ]
        for sec, cls in _SECTIONS.items():
            obj = getattr(self, sec)
            lines += ["", f"[{sec}]"]
            lines += [f"{f.name} = {_toml_value(getattr(obj, f.name))}" for f in toml_fields(cls)]
        lines += ["", "[costs]"]
        lines += [
            f"{f.name} = {_toml_value(getattr(self.costs, f.name))}"
            for f in fields(CostsSection)
            if f.name != "verify_ms"
        ]
        lines += ["", "[costs.verify_ms]  # n tokens in one target forward -> ms"]
        lines += [f"{n} = {_toml_value(ms)}" for n, ms in sorted(self.costs.verify_ms.items())]
        return "\n".join(lines) + "\n"


def _finite(v: float) -> float | None:
    """float(v) if it is a finite float (TOML integers can be arbitrarily large), else None."""
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
    return Path(shipped_pkg.__file__).resolve().parent


def user_dir() -> Path:
    """Where `edge-spec calibrate` writes by default: the store's `profiles/` folder."""
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


def load_profile(name_or_path: str | os.PathLike[str] | Profile) -> Profile:
    """Load and validate a profile by shipped/user name or path (a Profile passes through)."""
    if isinstance(name_or_path, Profile):
        return name_or_path
    path = find_profile(name_or_path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read profile {path}: {exc}") from None
    return parse_profile(text, path)


def parse_toml(text: str, where: Path) -> dict[str, Any]:
    """TOML text -> a dict, with one-line errors naming the file."""
    if tomllib is None:  # pragma: no cover - Python 3.10 without tomli
        raise UserError("reading TOML on Python 3.10 needs the 'tomli' package: pip install tomli")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where}: not valid TOML ({exc})") from None


def parse_profile(text: str, path: str | os.PathLike[str] = "<string>") -> Profile:
    """Parse and validate profile TOML text; `path` names the file in error messages."""
    where = Path(path)
    data = parse_toml(text, where)
    v = TomlValidator(where)
    top = v.table(data, "", {"name", "description", "costs", *_SECTIONS})
    sections = {sec: v.section(top.get(sec, {}), sec, cls) for sec, cls in _SECTIONS.items()}
    if "costs" not in top:
        raise UserError(
            f"{where}: missing section [costs] (verify_ms, drafter_ratio, "
            "prefill_ms_per_token, source)"
        )
    co = v.table(top["costs"], "costs", {f.name for f in fields(CostsSection)})
    for key in ("verify_ms", "drafter_ratio", "prefill_ms_per_token", "source"):
        if key not in co:
            raise UserError(f"{where}: missing key costs.{key}")
    costs = CostsSection(
        verify_ms=v.verify_table(co["verify_ms"]),
        drafter_ratio=v.get(co, "costs.drafter_ratio", float, None, lo=0.0),
        prefill_ms_per_token=v.get(
            co, "costs.prefill_ms_per_token", float, None, lo=0.0, lo_open=True
        ),
        source=v.choice(co, "costs.source", SOURCES, None),
        machine=v.get(co, "costs.machine", str, ""),
        date=v.get(co, "costs.date", str, ""),
        method=v.get(co, "costs.method", str, ""),
        target=v.get(co, "costs.target", str, ""),
    )
    return Profile(
        name=v.get(top, "name", str, where.stem),
        description=v.get(top, "description", str, ""),
        costs=costs,
        path=where,
        **sections,
    )


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


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
                raise UserError(
                    f"{self.path}: unknown key {full!r}"
                    f"{f' in [{name}]' if name else ''}; "
                    f"known keys: {', '.join(sorted(allowed))}"
                )
        return obj

    def section(self, obj: object, name: str, cls: type) -> Any:
        """A settings dataclass from a TOML table: types, bounds and choices from its fields."""
        settable = toml_fields(cls)
        tbl = self.table(obj, name, {f.name for f in settable})
        values: dict[str, Any] = {}
        for f in settable:
            if f.name not in tbl:
                continue
            typ = type(f.default) if f.default is not None else str
            key, meta = f"{name}.{f.name}", f.metadata
            if meta.get("choices"):
                values[f.name] = self.choice(tbl, key, meta["choices"], None)
            else:
                values[f.name] = self.get(tbl, key, typ, None, lo=meta.get("lo"), hi=meta.get("hi"))
        return cls(**values)

    def get(
        self,
        tbl: dict[str, Any],
        key: str,
        typ: type,
        default: Any,
        *,
        lo: float | None = None,
        hi: float | None = None,
        lo_open: bool = False,
    ) -> Any:
        short = key.rsplit(".", 1)[-1]
        if short not in tbl:
            return default
        val = tbl[short]
        ok = (
            isinstance(val, bool)
            if typ is bool
            else not isinstance(val, bool)
            and (isinstance(val, (int, float)) if typ is float else isinstance(val, typ))
        )
        if not ok:
            raise self.fail(key, f"must be {_TYPE_NAMES[typ]}, not {type(val).__name__} ({val!r})")
        if typ is float:
            val = _finite(val)
            if val is None:
                raise self.fail(key, f"must be a finite number, got {tbl[short]!r}")
        if lo is not None and (val < lo or (lo_open and val == lo)):
            raise self.fail(key, f"must be {'>' if lo_open else '>='} {lo}, got {val!r}")
        if hi is not None and val > hi:
            raise self.fail(key, f"must be <= {hi}, got {val!r}")
        return val

    def choice(
        self, tbl: dict[str, Any], key: str, options: tuple[str, ...], default: str | None
    ) -> str:
        val = self.get(tbl, key, str, default)
        if val not in options:
            raise self.fail(key, f"must be one of {', '.join(options)}, got {val!r}")
        return val

    def verify_table(self, obj: object) -> dict[int, float]:
        if not isinstance(obj, dict):
            raise self.fail(
                "costs.verify_ms",
                "must be a table of n = ms ([costs.verify_ms] with 1 = 38.5, ...)",
            )
        out: dict[int, float] = {}
        for raw, ms in obj.items():
            key = f"costs.verify_ms.{raw}"
            try:
                n = int(raw)
            except ValueError:
                raise UserError(
                    f"{self.path}: unknown key {key!r}: keys of costs.verify_ms "
                    f"are token counts 1..{MAX_POINT}"
                ) from None
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
            raise self.fail(
                "costs.verify_ms",
                "needs at least the points "
                f"{', '.join(map(str, REQUIRED_POINTS))}; missing "
                f"{', '.join(map(str, missing))}",
            )
        return dict(sorted(out.items()))

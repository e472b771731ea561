"""Bench modes (`plain`, `spec-adaptive`, peers...), task files and the prompts peers share."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from edge_spec.apply.plan import ApplyPlan, plan_apply
from edge_spec.errors import UserError

RESULT_FIELDS = (
    "task_id",
    "mode",
    "repeat",
    "output_tokens",
    "prefill_ms",
    "decode_ms",
    "decode_tok_s",
    "tokens_per_forward",
    "acceptance",
    "match_plain",
    "match_expected",
    "error",
    # What the user gets (edge_spec.bench.outcome; None outside our apply modes).
    "outcome",
    "refused_right",
    "engine_used",
    "e2e_ms",
)


@dataclass(frozen=True)
class Mode:
    """A named way of decoding: `draft` for ours, or a peer."""

    name: str
    draft: str = "none"
    fixed_k: int | None = None
    peer: str | None = None
    param: int | None = None
    pool: bool | None = None  # draft from earlier outputs; None: the engine's setting


_POOL_SUFFIXES = (("-nopool", False), ("-pool", True))


def _pool_of(name: str) -> tuple[str, bool | None]:
    """`spec-adaptive-nopool` -> (`spec-adaptive`, False): our modes with or without the pool."""
    for suffix, use in _POOL_SUFFIXES:
        if name.startswith("spec-") and name.endswith(suffix):
            return name.removesuffix(suffix), use
    return name, None


def parse_modes(spec: str, baseline: bool = True) -> list[Mode]:
    """`plain,spec-adaptive,spec-fixed-8,llamacpp-pld,llamacpp-pld-4` -> modes (plain first);
    `-pool` / `-nopool` after one of ours runs it with or without the pool of earlier outputs."""
    modes: list[Mode] = []
    for full in (s.strip() for s in spec.split(",") if s.strip()):
        name, pool = _pool_of(full)
        if pool is not None:
            inner = parse_modes(name, baseline=False)[0]
            modes.append(replace(inner, name=full, pool=pool))
        elif name == "plain":
            modes.append(Mode(name))
        elif name in ("spec-adaptive", "spec-adaptive-hybrid"):
            modes.append(Mode(name, "hybrid"))
        elif name.startswith("spec-adaptive-"):
            modes.append(Mode(name, name.removeprefix("spec-adaptive-")))
        elif name.startswith("spec-fixed-"):
            modes.append(Mode(name, "reference", fixed_k=_int(name, "spec-fixed-")))
        elif name.startswith("spec-model-fixed-"):
            modes.append(Mode(name, "model", fixed_k=_int(name, "spec-model-fixed-")))
        elif name == "llamacpp-pld":
            modes.append(Mode(name, peer="pld", param=10))
        elif name.startswith("llamacpp-pld-"):
            modes.append(Mode(name, peer="pld", param=_int(name, "llamacpp-pld-")))
        elif name in (
            "llama-server",
            "llama-server-ngram-simple",
            "llama-server-ngram-mod",
            "llama-server-draft",
        ):
            modes.append(Mode(name, peer="llama-server"))
        elif name in ("hf-plain", "hf-assisted"):
            modes.append(Mode(name, peer=name))
        elif name == "hf-pld":
            modes.append(Mode(name, peer="hf-pld", param=10))
        elif name.startswith("hf-pld-"):
            modes.append(Mode(name, peer="hf-pld", param=_int(name, "hf-pld-")))
        else:
            raise UserError(
                f"unknown bench mode {name!r}: use plain, spec-adaptive[-DRAFTER], "
                "spec-fixed-K, spec-model-fixed-K, llamacpp-pld[-N], hf-plain, "
                "hf-pld[-N], hf-assisted, llama-server[-ngram-simple|-ngram-mod|"
                "-draft]"
            )
    if baseline and (not modes or modes[0].name != "plain"):
        modes = [Mode("plain"), *[m for m in modes if m.name != "plain"]]
    return modes


def baseline_of(mode: str) -> str:
    """The mode a mode's speedup is measured against: hf-plain for the transformers peer
    (list hf-plain among the modes to get hf-* speedups)."""
    if mode.startswith("hf-"):
        return "hf-plain"
    return "llama-server" if mode.startswith("llama-server") else "plain"


def _int(name: str, prefix: str) -> int:
    try:
        return int(name.removeprefix(prefix))
    except ValueError:
        raise UserError(f"bench mode {name!r} needs a number after {prefix!r}") from None


def read_text(path: str | Path) -> str:
    """A UTF-8 text file, gunzipped when its name ends in `.gz` (task sets and recorded runs)."""
    p = Path(path)
    data = p.read_bytes()
    return (gzip.decompress(data) if p.suffix == ".gz" else data).decode("utf-8")


def load_tasks(path: str | Path, limit: int | None = None, skip: int = 0) -> list[dict[str, Any]]:
    """Tasks from JSONL (or .jsonl.gz): apply tasks (original, update[, instruction, expected])
    or prompts."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"task file not found: {path}")
    tasks = []
    for i, line in enumerate(read_text(p).splitlines(), 1):
        if not line.strip():
            continue
        try:
            t = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{i}: not valid JSON ({exc.msg})") from None
        if not ("prompt" in t or ("original" in t and "update" in t)):
            raise UserError(f"{path}:{i}: a task needs 'prompt' or 'original' and 'update'")
        t.setdefault("id", f"task-{i}")
        tasks.append(t)
    tasks = tasks[skip:]
    return tasks[:limit] if limit else tasks


def apply_plan(
    engine: Any, task: dict[str, Any], template: str | None = None, max_tokens: int | None = None
) -> ApplyPlan:
    """The apply plan our engine runs for a task, so peers decode from the same prompt."""
    return plan_apply(
        engine.target,
        task["original"],
        task["update"],
        task.get("instruction"),
        template=template,
        lang=task.get("language", ""),
        max_tokens=max_tokens,
    )

"""The default engine on the tasks the merge is unsure of, under two apply settings, side by side.

    python benchmarks/unsure_ab.py TASKS.jsonl [TASKS2.jsonl ...] --b region_context=6
                                   [--b choose_context=3] [--split dev] [--threads 2]
                                   [--limit N] [--out results.json]

One Engine (the demo pair) runs `apply(engine="auto")` on every task whose structural merge is
not sure, once with the default `ApplySettings` (A) and once with the `--b` overrides (B), the
order alternating per task. Per setting it prints what the user gets (right, right but for
whitespace, wrong with a warning, wrong without one, refused; of the refused, how many were
right) and the end-to-end seconds (p50, p95), then B's p50 over A's. Run it alone: these are
wall-clock times on a machine whose cores nothing else uses.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from edge_spec.apply.merge import structural_merge
from edge_spec.bench.modes import read_text
from edge_spec.engine import Engine, build_engine

_SETS = ("A", "B")


def _squash(text: str) -> str:
    return "".join(text.replace("\ufeff", "").split())


def _unsure(files: list[str], split: str) -> list[dict[str, Any]]:
    out = []
    for name in files:
        for line in read_text(name).splitlines():
            t = json.loads(line)
            if split != "all" and t.get("split", "dev") != split:
                continue
            merge = structural_merge(
                t["original"], t["update"], t.get("language", ""), t.get("path")
            )
            if not merge.exact:
                out.append(t)
    return out


def _outcome(text: str, expected: str, suspect: bool) -> str:
    right = text == expected
    near = _squash(text) == _squash(expected)
    if suspect:
        return "refused_right" if right else "refused"
    return "right" if right else "right_ws" if near else "wrong_silent"


def _run(eng: Engine, t: dict[str, Any]) -> tuple[str, float, str]:
    t0 = time.perf_counter()
    res = eng.apply(
        t["original"],
        t["update"],
        t.get("instruction"),
        lang=t.get("language", ""),
        path=t.get("path"),
    )
    wall = time.perf_counter() - t0
    return _outcome(res.text, t["expected"], bool(res.suspect)), wall, res.engine


def _value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="+")
    ap.add_argument("--b", action="append", default=[], help="NAME=VALUE of ApplySettings")
    ap.add_argument("--split", default="dev", help="dev, heldout or all")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--out")
    args = ap.parse_args()
    tasks = _unsure(args.tasks, args.split)
    tasks = tasks[: args.limit] if args.limit else tasks
    eng = build_engine(threads=args.threads)
    configs = {"A": eng.config}
    b = {k: _value(v) for k, v in (kv.split("=", 1) for kv in args.b)}
    configs["B"] = dataclasses.replace(eng.config, apply=dataclasses.replace(eng.config.apply, **b))
    rows: list[dict[str, Any]] = []
    for n, t in enumerate(tasks):
        for name in _SETS if n % 2 == 0 else _SETS[::-1]:
            eng.config = configs[name]
            outcome, wall, ran = _run(eng, t)
            rows.append({"id": t["id"], "set": name, "outcome": outcome, "s": wall, "ran": ran})
            print(
                f"[{n + 1}/{len(tasks)}] {t['id']:34} {name} {ran:7} {outcome:13} {wall:6.1f}s",
                file=sys.stderr,
                flush=True,
            )
    kinds = ("right", "right_ws", "wrong_silent", "refused", "refused_right")
    print(f"B = {b}")
    print(f"{'set':4} {'tasks':>5} " + " ".join(f"{k:>13}" for k in kinds) + "   p50 s   p95 s")
    p50 = {}
    for name in _SETS:
        mine = [r for r in rows if r["set"] == name]
        walls = sorted(r["s"] for r in mine)
        p50[name] = statistics.median(walls) if walls else 0.0
        p95 = walls[min(len(walls) - 1, int(0.95 * len(walls)))] if walls else 0.0
        counts = " ".join(f"{sum(r['outcome'] == k for r in mine):13}" for k in kinds)
        print(f"{name:4} {len(mine):5} {counts} {p50[name]:7.1f} {p95:7.1f}")
    if p50["A"]:
        print(f"p50 B / A: {p50['B'] / p50['A']:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"b": b, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()

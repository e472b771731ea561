"""The target's choice among an unsure hunk's readings, scored one way and another, side by side.

    python benchmarks/choose_ab.py TASKS.jsonl [--variants apply:none,code:48] [--max N]
                                   [--split dev|heldout|all] [--threads N]

For every task whose merge is unsure and whose hunks each keep two or more readings the answer
check allows, the target (the demo pair's, llama.cpp) scores the readings under each variant
(`prompt:tail`: the apply prompt or code after a fence; scoring cut `tail` tokens after the
readings rejoin, `none` to the end). Prints per task and variant the seconds, the tokens the
target evaluated (prompt included, from an empty cache), the smallest margin over the task's
hunks and whether the winner is the expected file (R) or not (W); then per variant the number
chosen right and wrong at the default margin and the median seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from edge_spec.apply.choose import allowed, choose, chosen_text
from edge_spec.apply.merge import structural_merge
from edge_spec.apply.readings import content
from edge_spec.bench.modes import read_text
from edge_spec.config.settings import ApplySettings, EngineConfig
from edge_spec.engine import Engine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tasks", nargs="+", type=Path)
    ap.add_argument("--variants", default="apply:none,code:48")
    ap.add_argument("--max", type=int, default=ApplySettings().choose_max)
    ap.add_argument("--split", default="dev", choices=("dev", "heldout", "all"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    cfg = EngineConfig()
    cfg = dataclasses.replace(cfg, runtime=dataclasses.replace(cfg.runtime, threads=args.threads))
    rt = Engine(config=cfg).target
    evals = [0]
    inner = rt.eval

    def counting(tokens: Sequence[int], rows: Sequence[int] | None = None):  # noqa: ANN202
        evals[0] += len(tokens)
        return inner(tokens, rows=rows)

    rt.eval = counting  # type: ignore[method-assign]
    variants = [v.split(":") for v in args.variants.split(",")]
    base = dataclasses.replace(ApplySettings(), choose_max=args.max)
    secs: dict[str, list[float]] = {f"{p}:{t}": [] for p, t in variants}
    tally: dict[str, list[int]] = {k: [0, 0] for k in secs}
    for path in args.tasks:
        for line in read_text(path).splitlines():
            task = json.loads(line)
            split = task.get("split", "dev")
            if args.split != "all" and split != args.split:
                continue
            orig, upd = task["original"], task["update"]
            merge = structural_merge(orig, upd, task.get("language", ""), task.get("path"))
            choices = None if merge.exact else allowed(orig, upd, merge, base)
            if not choices or any(len(c.edits) < 2 for c in choices):
                continue
            row = [task["id"], str([len(c.edits) for c in choices])]
            for p, t in variants:
                s = dataclasses.replace(
                    base, choose_prompt=p, choose_tail=10**5 if t == "none" else int(t)
                )
                rt.truncate(0)
                evals[0] = 0
                t0 = time.perf_counter()
                scored = choose(rt, orig, upd, merge, choices, s, merge.language)
                dt = time.perf_counter() - t0
                right = content(chosen_text(orig, merge, scored)) == content(task["expected"])
                margin = min(c.margin for c in scored)
                key = f"{p}:{t}"
                secs[key].append(dt)
                if margin >= s.choose_margin:
                    tally[key][0 if right else 1] += 1
                row.append(f"{key} {dt:.1f}s {evals[0]}tok m={margin:.1f} {'R' if right else 'W'}")
            print(" | ".join(row), flush=True)
    for key, (r, w) in tally.items():
        med = statistics.median(secs[key]) if secs[key] else 0.0
        print(f"{key}: chosen right {r}, chosen wrong {w}, median {med:.1f} s")


if __name__ == "__main__":
    main()

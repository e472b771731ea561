"""Apply by region vs whole-file apply, side by side, on the tasks the merge is unsure of.

    python benchmarks/region_ab.py TASKS.jsonl [TASKS2.jsonl ...] [--per-base 1] [--threads 2]
                                   [--out results.json]

For every task whose structural merge is not exact but places every hunk (so a region plan
exists; `--unplaced` adds the others), the demo target writes the file twice, alternating the order per task: `--engine model`
(the whole file) and `--engine region` (a window around each unsure hunk, the merge elsewhere).
Printed per engine: exact, token-equal (Pygments), suspect answers, p50/p95 end-to-end latency,
prompt and output tokens. `--per-base N` keeps N messy variants per source task (ids before `~`;
0 keeps all). `--engines auto` measures what the default engine does on those tasks: with the
merge's exact tasks (right by `merge_eval.py`), the whole set's `auto` accuracy.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from edge_spec.apply.merge import structural_merge
from edge_spec.apply.region import plan_regions
from edge_spec.bench.metrics import token_equal
from edge_spec.bench.modes import read_text
from edge_spec.config.settings import ApplySettings
from edge_spec.engine import build_engine

ENGINES = ("model", "region")


def _eligible(files: list[str], per_base: int, unplaced: bool = False) -> list[dict[str, Any]]:
    out, seen = [], defaultdict(int)
    for name in files:
        for line in read_text(name).splitlines():
            t = json.loads(line)
            merge = structural_merge(
                t["original"], t["update"], t.get("language", ""), t.get("path")
            )
            if merge.exact or (
                not unplaced
                and plan_regions(t["original"], t["update"], merge, ApplySettings(), force=True)
                is None
            ):
                continue
            base = t["id"].split("~")[0]
            if seen[base] < per_base:
                seen[base] += 1
                out.append(t)
    return out


def _run(eng: Any, t: dict[str, Any], engine: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    res = eng.apply(
        t["original"],
        t["update"],
        t.get("instruction"),
        lang=t.get("language", ""),
        path=t.get("path"),
        engine=engine,
    )
    wall = time.perf_counter() - t0
    return {
        "id": t["id"],
        "engine": engine,
        "ran": res.engine,
        "wall_s": round(wall, 2),
        "exact": res.text == t["expected"],
        "token_equal": bool(
            token_equal(res.text, t["expected"], t.get("language", ""), t.get("path", ""))
        ),
        "suspect": bool(res.suspect),
        "prompt_tokens": res.stats.prompt_tokens,
        "output_tokens": res.stats.output_tokens,
        "regions": res.regions,
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    walls = sorted(r["wall_s"] for r in rows)
    return {
        "tasks": len(rows),
        "exact": sum(r["exact"] for r in rows),
        "token_equal": sum(r["token_equal"] for r in rows),
        "suspect": sum(r["suspect"] for r in rows),
        "p50_s": round(statistics.median(walls), 2) if walls else 0.0,
        "p95_s": walls[min(len(walls) - 1, int(0.95 * len(walls)))] if walls else 0.0,
        "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
        "output_tokens": sum(r["output_tokens"] for r in rows),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="+")
    ap.add_argument("--per-base", type=int, default=1, help="0: every variant")
    ap.add_argument("--engines", default=",".join(ENGINES), help="e.g. auto")
    ap.add_argument(
        "--unplaced",
        action="store_true",
        help="also tasks with an unplaced hunk (no region plan: auto = whole file)",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--out")
    args = ap.parse_args()
    tasks = _eligible(args.tasks, args.per_base or 1 << 30, args.unplaced)
    engines = tuple(args.engines.split(","))
    tasks = tasks[: args.limit] if args.limit else tasks
    eng = build_engine(threads=args.threads)
    rows: list[dict[str, Any]] = []
    for n, t in enumerate(tasks):
        order = engines if n % 2 == 0 else engines[::-1]
        for engine in order:
            rows.append(_run(eng, t, engine))
            r = rows[-1]
            print(
                f"[{n + 1}/{len(tasks)}] {t['id']:40} {engine:6} {r['wall_s']:7.1f}s "
                f"exact={r['exact']} tok_eq={r['token_equal']} suspect={r['suspect']} "
                f"out={r['output_tokens']}",
                file=sys.stderr,
                flush=True,
            )
    summary = {e: _summary([r for r in rows if r["engine"] == e]) for e in engines}
    print(
        f"{'engine':8} {'tasks':>5} {'exact':>5} {'tok_eq':>6} {'suspect':>7} {'p50 s':>7} "
        f"{'p95 s':>7} {'prompt':>7} {'output':>7}"
    )
    for e, s in summary.items():
        print(
            f"{e:8} {s['tasks']:5} {s['exact']:5} {s['token_equal']:6} {s['suspect']:7} "
            f"{s['p50_s']:7.1f} {s['p95_s']:7.1f} {s['prompt_tokens']:7} {s['output_tokens']:7}"
        )
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Pool against no pool, from `edge-spec bench` results of modes `...-pool` and `...-nopool`.

    python benchmarks/pool_report.py RESULTS.json [RESULTS.json ...] --tasks TASKS.jsonl
        [--with spec-adaptive-pool] [--without spec-adaptive-nopool]

Per split (dev, heldout) and for all: tokens per forward overall, on changed lines and on
copied lines (`changed_tokens / changed_forwards`, as `edge_spec.bench.metrics.line_split`
counts them), decode speed over plain, and the pool's speedup over no pool as the median over
sequences of the median per-task ratio in each sequence, for the later requests of a sequence
(the pool may hold its change) and for the first (the pool does not: it must cost nothing).
Every output must equal plain's (`match_plain`).
"""

from __future__ import annotations

import argparse
import json
import statistics as st
from collections import defaultdict
from pathlib import Path
from typing import Any


def _load(paths: list[str]) -> list[dict[str, Any]]:
    out = []
    for p in paths:
        out += json.loads(Path(p).read_text())
    return out


def _tasks(path: str) -> dict[str, dict[str, Any]]:
    rows = [json.loads(ln) for ln in Path(path).read_text().splitlines() if ln.strip()]
    return {t["id"]: t for t in rows}


def _tpf(rs: list[dict[str, Any]], part: str) -> float | None:
    toks = sum(r.get(f"{part}_tokens") or 0 for r in rs)
    fwd = sum(r.get(f"{part}_forwards") or 0 for r in rs)
    return round(toks / fwd, 2) if fwd else None


def _median(xs: list[float]) -> float | None:
    return round(st.median(xs), 3) if xs else None


def report(
    records: list[dict[str, Any]], tasks: dict[str, dict[str, Any]], on: str, off: str
) -> dict[str, Any]:
    by = {(r["task_id"], r["mode"]): r for r in records if not r.get("error")}
    out: dict[str, Any] = {}
    for split in ("dev", "heldout", "all"):
        ids = [i for i in tasks if split == "all" or tasks[i].get("split", "dev") == split]
        ids = [i for i in ids if (i, on) in by and (i, off) in by and (i, "plain") in by]
        if not ids:
            continue
        row: dict[str, Any] = {"tasks": len(ids)}
        for mode in (off, on):
            rs = [by[(i, mode)] for i in ids]
            row[mode] = {
                "tokens_per_forward": _median([r["tokens_per_forward"] for r in rs]),
                "tpf_changed": _tpf(rs, "changed"),
                "tpf_copied": _tpf(rs, "copied"),
                "speedup_over_plain": _median(
                    [
                        r["decode_tok_s"] / by[(i, "plain")]["decode_tok_s"]
                        for i, r in zip(ids, rs, strict=True)
                    ]
                ),
                "match_plain": sum(bool(r["match_plain"]) for r in rs),
            }
        later: dict[str, list[float]] = defaultdict(list)
        first: list[float] = []
        for i in ids:
            ratio = by[(i, on)]["decode_tok_s"] / by[(i, off)]["decode_tok_s"]
            seq = tasks[i].get("sequence", i)
            if tasks[i].get("order", 0) == 0:
                first.append(ratio)
            else:
                later[seq].append(ratio)
        row["pool_over_nopool_later"] = _median([st.median(v) for v in later.values()])
        row["pool_over_nopool_first"] = _median(first)
        row["sequences"] = len(later)
        out[split] = row
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+")
    p.add_argument("--tasks", required=True)
    p.add_argument("--with", dest="on", default="spec-adaptive-pool")
    p.add_argument("--without", dest="off", default="spec-adaptive-nopool")
    a = p.parse_args(argv)
    print(json.dumps(report(_load(a.results), _tasks(a.tasks), a.on, a.off), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

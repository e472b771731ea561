"""Merge the results.json of several `edge-spec bench` runs (e.g. one task file run in chunks).

    python benchmarks/merge_results.py --out DIR --tasks NAME [--note TEXT] RUN_DIR...

Writes DIR/results.json and DIR/summary.md with the medians over all records, recomputed by
`edge_spec.bench.summarize`; each record keeps what its own run measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from model_accuracy import results_file  # (run as a script: benchmarks/ is on the path)

from edge_spec.apply import lazy_lines
from edge_spec.bench.bench import machine, summarize
from edge_spec.bench.modes import load_tasks, read_text
from edge_spec.bench.report import write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "runs", nargs="+", type=Path, help="bench output folders or their results JSON files"
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tasks", required=True, help="what the merged tasks are, for the header")
    ap.add_argument("--note", default="", help="how the runs were made (commands, threads)")
    ap.add_argument("--template", default="from the model")
    ap.add_argument(
        "--task-file",
        type=Path,
        help="the tasks' JSONL: fills `lazy` in records made before it existed",
    )
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m")
    ap.add_argument("--drafter", default="qwen2.5-coder-0.5b-instruct")
    args = ap.parse_args()
    records: list[dict] = []
    for run in args.runs:
        records += json.loads(read_text(results_file(run)))
    if args.task_file:
        originals = {t["id"]: t.get("original") for t in load_tasks(str(args.task_file))}
        for r in records:
            if r.get("lazy") is None and r.get("text") is not None and originals.get(r["task_id"]):
                r["lazy"] = len(lazy_lines(r["text"], originals[r["task_id"]]))
    ids = [(r["task_id"], r["mode"], r["repeat"]) for r in records]
    if len(set(ids)) != len(ids):
        raise SystemExit("error: the runs overlap (a task, mode and repeat appears twice)")
    meta = {
        "command": args.note or "merged: " + " ".join(map(str, args.runs)),
        "tasks": args.tasks,
        "n_tasks": len({r["task_id"] for r in records}),
        "repeat": max((r["repeat"] for r in records), default=0) + 1,
        "model": args.model,
        "drafter": args.drafter,
        "threads": "see the runs",
        "profile": "built-in defaults",
        "template": args.template,
        "machine": machine(),
        "date": dt.datetime.now().isoformat(timespec="seconds"),
    }
    write_results(args.out, records, summarize(records), meta)
    print(f"{len(records)} records from {len(args.runs)} runs -> {args.out}")


if __name__ == "__main__":
    main()

"""Re-run the near-tie check on one "≠ plain" record of a bench run, with the apply guard.

    python benchmarks/prove_divergence.py --results DIR/results.json --tasks TASKS.jsonl \
        --task ID --mode MODE [--threads 2]

Rebuilds the task's apply plan (prompt tokens and guard) with the demo target, and reports
where MODE's output first differs from the plain record's, the top-2 logit gap there over the
tokens the guard allows, and the batch-vs-single noise around it (`edge_spec.bench.neartie`).
Records made before the check knew the guard can be re-proven this way.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from edge_spec.apply.plan import plan_apply
from edge_spec.bench.modes import read_text
from edge_spec.bench.neartie import divergence
from edge_spec.config.settings import DEMO_TARGET
from edge_spec.runtimes.base import RuntimeOptions
from edge_spec.runtimes.llamacpp import LlamaCppRuntime
from edge_spec.store.models import resolve


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", type=Path, required=True)
    ap.add_argument("--tasks", type=Path, required=True)
    ap.add_argument("--task", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=8192)
    args = ap.parse_args()
    task = next(
        t
        for t in (json.loads(x) for x in read_text(args.tasks).splitlines() if x.strip())
        if t["id"] == args.task
    )
    recs = {(r["task_id"], r["mode"]): r for r in json.loads(read_text(args.results))}
    plain = recs[(args.task, "plain")]["output_ids"]
    ours = recs[(args.task, args.mode)]["output_ids"]
    rt = LlamaCppRuntime(
        resolve(DEMO_TARGET), RuntimeOptions(n_ctx=args.n_ctx, threads=args.threads)
    )
    plan = plan_apply(
        rt, task["original"], task["update"], task.get("instruction"), lang=task.get("language", "")
    )
    for label, guard in (("without the guard", None), ("with the guard", plan.guard)):
        d = divergence(rt, plan.tokens, plain, ours, guard=guard)
        print(f"{label}: {json.dumps(d.to_dict()) if d else 'identical'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

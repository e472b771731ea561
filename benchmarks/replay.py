"""Price draft-length policies on recorded greedy runs, in seconds (issue 17, item 1).

    python benchmarks/replay.py --results bench-out/results.json \
        --tasks benchmarks/data/code_apply_dev_small.jsonl [--profile cpu-2core] \
        [--policies fixed-16,fixed-32,fixed-64,fixed-128,adaptive,oracle] [--model PATH] [--json]

Each task's recorded output (the `plain` mode's `output_ids`) is replayed through the real loop,
reference drafter and controller on a virtual clock priced by the profile's verify-cost table
(edge_spec.bench.replay). `--set k_max=64 --set prior_weight=8 --set feature_priors.ref-start=0.998` tries controller
settings.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from edge_spec.bench.replay import parse_traces, replay_all, summarize_replay
from edge_spec.config.profiles import load_profile
from edge_spec.config.settings import ControllerSettings

POLICIES = "fixed-16,fixed-32,fixed-64,fixed-128,adaptive,oracle"


def _settings(profile: str, sets: list[str]) -> ControllerSettings:
    cfg = load_profile(profile).controller_config()
    for item in sets:
        key, _, value = item.partition("=")
        key, _, entry = key.partition(".")
        if entry:  # a mapping's entry: feature_priors.ref-start=0.998
            table = dict(getattr(cfg, key))
            table[entry] = float(value)
            cfg = replace(cfg, **{key: table})
            continue
        kind = type(getattr(cfg, key))
        cfg = replace(cfg, **{key: kind(value)})
    return cfg


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu-2core")
    ap.add_argument("--policies", default=POLICIES)
    ap.add_argument("--template", default=None)
    ap.add_argument("--set", action="append", default=[], help="controller setting NAME=VALUE")
    ap.add_argument("--fresh", action="store_true",
                    help="a new controller per task (default: one per policy across the tasks, "
                         "in order, as a bench run or a server keeps it)")
    a, tok, cases = parse_traces(ap, argv)
    cfg = _settings(a.profile, a.set)
    rows = replay_all(tok, cases, a.policies.split(","), cfg, a.template, a.fresh)
    summary = summarize_replay(rows)
    if a.json:
        print(json.dumps({"rows": rows, "summary": summary}))
        return 0
    print(f"{'task':28} " + " ".join(f"{p:>10}" for p in a.policies.split(",")))
    for c in cases:
        tid = c.task["id"]
        sp = {r["policy"]: r["speedup"] for r in rows if r["task_id"] == tid}
        print(f"{tid:28} " + " ".join(f"{sp.get(p) or 0:10.2f}" for p in a.policies.split(",")))
    print(f"{'median':28} " + " ".join(f"{summary[p]['median']:10.2f}" for p in a.policies.split(",")))
    print(f"{'worst':28} " + " ".join(f"{summary[p]['worst']:10.2f}" for p in a.policies.split(",")))
    if "oracle" in summary:  # (the share of the oracle needs the oracle's replay)
        print(f"{'of oracle (median)':28} " + " ".join(
            f"{summary[p]['of_oracle']:10.2f}" for p in a.policies.split(",")))
    bad = [p for p, s in summary.items() if not s["same_output"]]
    if bad:
        print(f"warning: replayed output differs from the record for {bad}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

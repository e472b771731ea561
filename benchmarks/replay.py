"""Price draft-length policies on recorded greedy runs, in seconds.

    python benchmarks/replay.py --results bench-out/results.json \
        --tasks benchmarks/data/code_apply_dev_small.jsonl [--profile cpu-2core] \
        [--policies fixed-16,fixed-32,fixed-64,fixed-128,adaptive,oracle] [--model PATH] [--json]

Each task's recorded output (the `plain` mode's `output_ids`) is replayed through the real loop,
reference drafter and controller on a virtual clock priced by the profile's verify-cost table
(edge_spec.bench.replay). `--set k_max=64 --set prior_weight=8 --set feature_priors.ref-start=0.998` tries controller
settings.
`--world RESULTS` prices steps as that live run paid them (its median per forward size, with its
step-to-step noise, seeded per task and policy) while the controller starts from the profile;
`--world-sizes FILE` prices them by a `benchmarks/verify_sizes.py` output (a dense curve, with
the sizes between powers of two that a calibrated table does not hold). With step noise one
replay is one draw, and a controller that learns from noisy steps takes other paths in other
draws (its median moves by several percent): `--seeds N` replays N draws, averages each task's
speedup over them and shows the range of the draws' medians.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from edge_spec.bench.costfit import fit_costs
from edge_spec.bench.modes import read_text
from edge_spec.bench.replay import (
    World,
    mean_rows,
    parse_traces,
    replay_all,
    summarize_replay,
)
from edge_spec.config.profiles import load_profile
from edge_spec.config.settings import ControllerSettings

POLICIES = "fixed-16,fixed-32,fixed-64,fixed-128,adaptive,oracle"
_SHOWN = {1, 2, 5, 9, 17, 33, 65, 129}


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


def _sizes_table(path: Path) -> dict[int, float]:
    """n -> median ms from a `benchmarks/verify_sizes.py` output."""
    table = {}
    for line in path.read_text().splitlines():
        cols = line.split()
        if len(cols) >= 2 and cols[0].isdigit():
            table[int(cols[0])] = float(cols[1])
    if 1 not in table or len(table) < 2:
        print(
            f"error: {path} holds no verify_sizes.py table (rows 'n  median ms ...', n = 1 "
            "among them); run benchmarks/verify_sizes.py > FILE first",
            file=sys.stderr,
        )
        sys.exit(2)
    return table


def _world(
    path: Path | None, noise: float | None, min_steps: int, sizes: Path | None = None
) -> World:
    if sizes is not None:
        return World(_sizes_table(sizes), noise or 0.0)
    if path is None:
        return World(None, noise or 0.0)
    data = json.loads(read_text(path))
    table, sigma = fit_costs(data["records"] if isinstance(data, dict) else data, min_steps)
    print(
        f"world: {path} (sigma {sigma}); verify ms "
        + ", ".join(f"{n}={ms:.0f}" for n, ms in table.items() if n in _SHOWN),
        file=sys.stderr,
    )
    return World(table, sigma if noise is None else noise)


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu-2core")
    ap.add_argument("--policies", default=POLICIES)
    ap.add_argument("--template", default=None)
    ap.add_argument("--set", action="append", default=[], help="controller setting NAME=VALUE")
    worlds = ap.add_mutually_exclusive_group()
    worlds.add_argument(
        "--world",
        type=Path,
        default=None,
        help="a bench results.json whose recorded verify times set what steps cost "
        "(median per size) and their noise; the controller still starts from "
        "--profile's table (default: the profile's table is the truth)",
    )
    worlds.add_argument(
        "--world-sizes",
        type=Path,
        default=None,
        help="a benchmarks/verify_sizes.py output whose medians set what steps cost "
        "(instead of --world)",
    )
    ap.add_argument(
        "--world-min-steps",
        type=int,
        default=5,
        help="sizes with fewer recorded steps are interpolated in --world's curve",
    )
    ap.add_argument(
        "--noise",
        type=float,
        default=None,
        help="log-normal sigma of each step's cost (default: --world's, else 0)",
    )
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="a new controller per task (default: one per policy across the tasks, "
        "in order, as a bench run or a server keeps it)",
    )
    ap.add_argument(
        "--seeds",
        type=_positive,
        default=1,
        help="replay under this many draws of the step noise; each task's speedup "
        "is then the mean over the draws, and the medians of each draw are "
        "shown as a range",
    )
    a, tok, cases = parse_traces(ap, argv)
    cfg = _settings(a.profile, a.set)
    world = _world(a.world, a.noise, a.world_min_steps, a.world_sizes)
    draws = [
        replay_all(
            tok, cases, a.policies.split(","), cfg, a.template, a.fresh, replace(world, seed=seed)
        )
        for seed in range(a.seeds)
    ]
    rows = mean_rows(draws)
    summary = summarize_replay(rows)
    by_draw = [summarize_replay(d) for d in draws]
    if a.json:
        print(json.dumps({"rows": rows, "summary": summary, "draws": by_draw}))
        return 0
    print(f"{'task':28} " + " ".join(f"{p:>10}" for p in a.policies.split(",")))
    for c in cases:
        tid = c.task["id"]
        sp = {r["policy"]: r["speedup"] for r in rows if r["task_id"] == tid}
        print(f"{tid:28} " + " ".join(f"{sp.get(p) or 0:10.2f}" for p in a.policies.split(",")))
    print(
        f"{'median':28} " + " ".join(f"{summary[p]['median']:10.2f}" for p in a.policies.split(","))
    )
    print(
        f"{'worst':28} " + " ".join(f"{summary[p]['worst']:10.2f}" for p in a.policies.split(","))
    )
    if a.seeds > 1:
        print(
            f"{'median, range of draws':28} "
            + " ".join(
                f"{min(d[p]['median'] for d in by_draw):>4.2f}-{max(d[p]['median'] for d in by_draw):<4.2f}".rjust(
                    10
                )
                for p in a.policies.split(",")
            )
        )
    if "oracle" in summary:  # (the share of the oracle needs the oracle's replay)
        print(
            f"{'of oracle (median)':28} "
            + " ".join(f"{summary[p]['of_oracle']:10.2f}" for p in a.policies.split(","))
        )
    bad = [p for p, s in summary.items() if not s["same_output"]]
    if bad:
        print(f"warning: replayed output differs from the record for {bad}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

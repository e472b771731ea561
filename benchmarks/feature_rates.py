"""How often each reference-draft feature is right, on recorded greedy runs (the controller's priors).

    python benchmarks/feature_rates.py --results RUN/results.json --tasks TASKS.jsonl [--mode plain]

Each task's recorded output is replayed (edge_spec.bench.replay) with drafts as long as the
reference drafter has them (up to 512 tokens), so every draft is judged to its first wrong
token. Per feature: drafts, rejections, how many of them at the first token, and the per-token
hazard past the first token; the two rates the controller's pooled model of a reference draft
has (`edge_spec.core.controller`). `DEFAULT_FEATURE_PRIORS` in `edge_spec/config/settings.py`
come from these tables (benchmarks/results/controller-replay-2core/README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence

from edge_spec.apply.plan import plan_apply
from edge_spec.bench.replay import (
    ReplayRuntime,
    VirtualClock,
    parse_traces,
    table_cost,
)
from edge_spec.config.settings import ControllerSettings, ReferenceSettings, SamplingSettings
from edge_spec.core.controller import Controller, FixedK
from edge_spec.core.loop import GenConfig, generate
from edge_spec.core.types import Draft
from edge_spec.drafters.reference import ReferenceDrafter

LONGEST = 512


class Recorder(FixedK):
    """Drafts all the drafter has (up to LONGEST) and keeps (feature, k, accepted) per step."""

    def __init__(self) -> None:
        super().__init__(LONGEST, Controller(ControllerSettings(k_max=LONGEST)))
        self.steps: list[tuple[str, int, int]] = []

    def observe(self, draft: Draft, k: int, accepted: int, verify_ms: float) -> None:
        if k:
            self.steps.append((draft.feature, k, accepted))
        super().observe(draft, k, accepted, verify_ms)


def rates(steps: Sequence[tuple[str, int, int]]) -> dict[str, dict[str, float]]:
    """Per feature: drafts, rejected, rejected at the first token, positions judged, hazard."""
    acc: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for feature, k, accepted in steps:
        row = acc[feature]
        rejected = accepted < k
        row[0] += 1
        row[1] += rejected
        row[2] += rejected and accepted == 0
        row[3] += accepted + rejected
    out = {}
    for feature, (n, rej, first, judged) in sorted(acc.items()):
        later = judged - n  # positions past each draft's first token
        out[feature] = {
            "drafts": n,
            "rejected": rej,
            "rejected_first": first,
            "first_rate": round(first / n, 3),
            "later_hazard": round((rej - first) / later, 5) if later else None,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a, tok, cases = parse_traces(ap, argv)
    cost = table_cost(ControllerSettings().verify_ms)
    steps: list[tuple[str, int, int]] = []
    for case in cases:
        t = case.task
        plan = plan_apply(
            tok, t["original"], t["update"], t.get("instruction"), lang=t.get("language", "")
        )
        clock = VirtualClock()
        rt = ReplayRuntime(tok, plan.tokens, case.output_ids, cost, clock)
        rec = Recorder()
        gen = GenConfig(len(case.output_ids) + 1, (), SamplingSettings())
        generate(
            rt,
            plan.tokens,
            [ReferenceDrafter(rt, ReferenceSettings())],
            rec,
            gen,
            plan.references,
            clock=clock,
        )
        steps += rec.steps
    table = rates(steps)
    if a.json:
        print(json.dumps(table))
        return 0
    print(
        f"{'feature':12} {'drafts':>7} {'rejected':>9} {'at 1st':>7} {'1st rate':>9} "
        f"{'later hazard':>13}"
    )
    for feature, r in table.items():
        later = "-" if r["later_hazard"] is None else f"{r['later_hazard']:.5f}"
        print(
            f"{feature:12} {r['drafts']:7d} {r['rejected']:9d} {r['rejected_first']:7d} "
            f"{r['first_rate']:9.3f} {later:>13}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

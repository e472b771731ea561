"""Can today's apply guard still write the recorded answers? Replay them by their output ids.

    python benchmarks/guard_replay.py --tasks TASKS.jsonl [--mode spec-adaptive] RUN_DIR...

For each task (the first record per task wins, as in `model_accuracy.py`) it builds the task's
apply plan with today's code and feeds the record's own `output_ids` through the plan's guard,
token by token: a token the guard bans means greedy decoding under today's guard would not
write that answer, so the record must be re-run before it is quoted with
today's guard. So must a record that passes a state where the order lets go (a dead end,
`LineSet.dead_end`): there today's guard allows more than the order did. Replaying the ids
matters: re-tokenizing the answer's text splits runs of blanks differently and misses some.
(Passing is necessary, not sufficient: a guard that also allows more elsewhere than the one
that wrote the answer may pick another token; check that separately, or re-run.)
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from model_accuracy import load_records  # (run as a script: benchmarks/ is on the path)

from edge_spec.apply.plan import plan_apply
from edge_spec.config.settings import DEMO_TARGET, RuntimeSettings
from edge_spec.core.guard import guard_state
from edge_spec.runtimes.base import Only
from edge_spec.runtimes.llamacpp import LlamaCppRuntime
from edge_spec.store.models import resolve


def replay(rt: LlamaCppRuntime, task: dict[str, Any], rec: dict[str, Any]) -> str:
    """'' when the guard lets the answer through, else where it does not."""
    plan = plan_apply(
        rt, task["original"], task["update"], task.get("instruction"), lang=task.get("language", "")
    )
    guard = plan.guard
    if guard is None:
        return ""
    state = guard_state(guard, rt, plan.tokens)
    let_go = getattr(guard, "dead_end", None)
    for n, tok in enumerate(rec["output_ids"]):
        mask = guard.banned(state)
        if isinstance(mask, Only) and mask.ids.size and tok not in set(mask.ids.tolist()):
            return f"token {n} ({rt.token_bytes(tok)!r}) banned after {state.ctx[-40:]!r}"
        if let_go is not None and let_go(state):
            # The order lets go here: today's guard allows more than it may have, so greedy
            # decoding may pick another token.
            return f"token {n}: the order lets go after {state.ctx[-40:]!r}"
        state = guard.advance(state, rt.token_bytes(tok))
    return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--tasks", type=Path, required=True)
    ap.add_argument("--mode", default="spec-adaptive")
    ap.add_argument("--model", default=DEMO_TARGET, help="GGUF file or store name (the target)")
    args = ap.parse_args()
    tasks, recs = load_records(args.tasks, args.runs, args.mode)
    recs = {i: r for i, r in recs.items() if r.get("output_ids") is not None}
    rt = LlamaCppRuntime(resolve(args.model), RuntimeSettings(n_ctx=512, threads=1))
    stale = []
    for tid, rec in recs.items():
        why = replay(rt, tasks[tid], rec)
        if why:
            stale.append(tid)
            print(f"{tid}: {why}")
    print(
        f"{len(recs) - len(stale)} of {len(recs)} recorded answers pass today's guard token "
        f"for token; re-run: {' '.join(stale) or 'none'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

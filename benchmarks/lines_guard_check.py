"""Does the `order` (or `lines`) apply guard let a right answer through? Walk every expected file
through it.

    python benchmarks/lines_guard_check.py [--model GGUF] [--guard order|lines] TASKS.jsonl...

For each task it takes the guard of the task's apply plan (`plan_apply`: the original's lines,
the snippet's without its markers, the closing fence, the two tail lines), tokenizes the expected file with
the target's tokenizer and feeds it token by token: it counts the tokens the guard would have
banned, and whether the answer may end (end of text or the closing fence) after the last line.
Both must be zero for a guard that costs right answers nothing. It also prints the cost:
milliseconds to build the plan per task (the guard's vocabulary index once) and microseconds per
token.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from edge_spec.apply.plan import plan_apply
from edge_spec.bench.modes import read_text
from edge_spec.config.settings import DEMO_TARGET, RuntimeSettings
from edge_spec.core.guard import guard_state
from edge_spec.runtimes.base import Only
from edge_spec.runtimes.llamacpp import LlamaCppRuntime
from edge_spec.store.models import resolve


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tasks", nargs="+", type=Path)
    ap.add_argument("--model", default=DEMO_TARGET, help="GGUF file or store name (its tokenizer)")
    ap.add_argument("--guard", default="order", choices=("order", "lines"))
    args = ap.parse_args()
    rt = LlamaCppRuntime(resolve(args.model), RuntimeSettings(n_ctx=512, threads=1))
    eos = next(t for t in range(rt.n_vocab) if rt.is_eog(t))
    n = banned = cannot_end = tokens = 0
    builds: list[float] = []
    walk = 0.0
    for path in args.tasks:
        for task in map(json.loads, read_text(path).splitlines()):
            n += 1
            t0 = time.perf_counter()
            plan = plan_apply(
                rt,
                task["original"],
                task["update"],
                task.get("instruction"),
                lang=task.get("language", ""),
                guard=args.guard,
            )
            builds.append(1e3 * (time.perf_counter() - t0))
            guard = plan.guard
            assert guard is not None
            fence = rt.tokenize(plan.stop[0].lstrip("\n"), special=False)[0]
            state = guard_state(guard, rt, plan.tokens)
            ids = rt.tokenize(task["expected"].replace("\r\n", "\n"), special=False)
            t0 = time.perf_counter()
            for tok in ids:
                mask = guard.banned(state)
                if isinstance(mask, Only) and tok not in set(mask.ids.tolist()):
                    banned += 1
                    print(
                        f"banned: {task['id']} after {state.ctx[-60:]!r}: {rt.token_bytes(tok)!r}"
                    )
                state = guard.advance(state, rt.token_bytes(tok))
            walk += time.perf_counter() - t0
            tokens += len(ids)
            end = guard.banned(state)
            if isinstance(end, Only) and not {eos, fence} & set(end.ids.tolist()):
                cannot_end += 1
                print(f"cannot end: {task['id']}")
    builds_sorted = sorted(builds[1:]) or builds
    print(
        f"guard {args.guard}: {n} tasks, {tokens} tokens: {banned} banned, {cannot_end} cannot end"
    )
    print(
        f"plan build: first {builds[0]:.0f} ms (with the vocabulary index), then median "
        f"{builds_sorted[len(builds_sorted) // 2]:.1f} ms; walk {1e6 * walk / max(1, tokens):.0f} "
        "us per token (a new row state each)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

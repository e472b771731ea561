"""How well the answer check tells right model answers from wrong ones, without a model.

    python benchmarks/answer_check_eval.py TASKS.jsonl [TASKS2.jsonl ...] [--json] [--seed N]
                                           [--show KIND]

For every task the check (`edge_spec.apply.check.verdict.answer_problems`) is run on the expected
file (a right answer: a finding there is a false alarm) and on wrong answers of the kinds models
write, each derived from the task with a seeded generator:

- `merge-wrong`: the structural merge's own text where it differs from the expected file (a
  misplaced or misread hunk, the commonest wrong answer of a model drafting from it);
- `dropped`: the expected file with 3-8 unchanged lines removed far from any edit (a silent
  omission);
- `lazy`: the same lines replaced by a marker comment (what the decode-time guard forbids; the
  check must catch it anyway, e.g. for a backend without the guard);
- `stale`: the original itself (the edit not applied);
- `kept-old`: every replaced original block kept beside its new lines (old and new code both).
- `changed`: one unchanged line far from any edit altered (a renamed identifier).
- `eaten`: 3-12 unchanged lines dropped right beyond the context the snippet shows around an
  edit, where its marker stands (everything between the imports and a new function, say);
- `left-out`: one changed line of the snippet missing from the answer.

A task marked `ambiguous` (its snippet does not say where its code goes) counts its expected
file apart, as `ambiguous`: there a flag is the honest answer, not a false alarm.

Reports per kind how many answers the check flags. Answers equal to the expected file after a
kind's change (a no-op change) are skipped.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from edge_spec.apply.check.verdict import answer_problems
from edge_spec.apply.merge import structural_merge
from edge_spec.bench.modes import read_text

_COMMENT = {"python": "#", "ruby": "#", "shell": "#", "bash": "#", "yaml": "#", "toml": "#"}


def _far_run(orig: list[str], exp: list[str], rng: random.Random) -> tuple[int, int] | None:
    """A run of 3-8 expected-file lines inside an unchanged block, 3 lines from its edges."""
    blocks = [
        (j1 + 3, j2 - 3)
        for op, _i1, _i2, j1, j2 in SequenceMatcher(None, orig, exp, autojunk=False).get_opcodes()
        if op == "equal" and j2 - j1 >= 9
    ]
    runs = [(a, b) for a, b in blocks if any(ln.strip() for ln in exp[a:b])]
    if not runs:
        return None
    a, b = rng.choice(runs)
    n = rng.randint(3, min(8, b - a))
    start = rng.randint(a, b - n)
    return start, start + n


def wrong_answers(task: dict[str, Any], merged: str, rng: random.Random) -> dict[str, str]:
    """The wrong answers of each kind for one task (kinds that do not apply are left out)."""
    orig = task["original"].split("\n")
    exp = task["expected"].split("\n")
    out: dict[str, str] = {}
    if merged != task["expected"]:
        out["merge-wrong"] = merged
    run = _far_run(orig, exp, rng)
    if run is not None:
        a, b = run
        indent = exp[a][: len(exp[a]) - len(exp[a].lstrip())]
        mark = _COMMENT.get(task.get("language") or "", "//")
        out["dropped"] = "\n".join(exp[:a] + exp[b:])
        out["lazy"] = "\n".join(exp[:a] + [f"{indent}{mark} ... existing code ..."] + exp[b:])
        k = rng.randrange(a, b)
        if exp[k].strip():
            changed = list(exp)
            changed[k] = changed[k].replace(changed[k].strip(), changed[k].strip() + "_x", 1)
            out["changed"] = "\n".join(changed)
    if task["original"] != task["expected"]:
        out["stale"] = task["original"]
    kept: list[str] = []
    any_replace = False
    for op, i1, i2, j1, j2 in SequenceMatcher(None, orig, exp, autojunk=False).get_opcodes():
        kept += exp[j1:j2]
        if op == "replace" and any(ln.strip() for ln in orig[i1:i2]):
            kept += orig[i1:i2]
            any_replace = True
    if any_replace:
        out["kept-old"] = "\n".join(kept)
    eaten = _eaten(exp, task["update"].split("\n"), orig, rng)
    if eaten is not None:
        out["eaten"] = eaten
    new = [
        j
        for op, _i1, _i2, j1, j2 in SequenceMatcher(None, orig, exp, autojunk=False).get_opcodes()
        if op != "equal"
        for j in range(j1, j2)
        if exp[j].strip()
    ]
    if new:
        k = rng.choice(new)
        out["left-out"] = "\n".join(exp[:k] + exp[k + 1 :])
    return {k: v for k, v in out.items() if v != task["expected"]}


def _eaten(exp: list[str], snippet: list[str], orig: list[str], rng: random.Random) -> str | None:
    """The expected file with 3-12 lines dropped just past the snippet's context of an edit."""
    shown = {ln.strip() for ln in snippet if ln.strip()}
    cuts = []
    for op, _i1, _i2, j1, j2 in SequenceMatcher(None, orig, exp, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        top = j1
        while top > 0 and (exp[top - 1].strip() in shown or not exp[top - 1].strip()):
            top -= 1
        bottom = j2
        while bottom < len(exp) and (exp[bottom].strip() in shown or not exp[bottom].strip()):
            bottom += 1
        cuts += [(max(0, top - n), top) for n in (3, 12) if top > 0]
        cuts += [(bottom, min(len(exp), bottom + n)) for n in (3, 12) if bottom < len(exp)]
    cuts = [(a, b) for a, b in cuts if any(ln.strip() for ln in exp[a:b])]
    if not cuts:
        return None
    a, b = rng.choice(cuts)
    return "\n".join(exp[:a] + exp[b:])


def evaluate(tasks: list[dict[str, Any]], seed: int) -> tuple[dict[str, list[int]], list[dict]]:
    # kind -> [flagged, answers, flagged where the merge is unsure, answers there]
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    rows = []
    for task in tasks:
        rng = random.Random(f"{seed}:{task.get('id', '')}:{task.get('kind', '')}")
        merge = structural_merge(
            task["original"], task["update"], task.get("language") or "", task.get("path")
        )
        # A task marked `ambiguous` has no right placement to tell (a new method with no
        # neighbour shown): its expected file is one reading among others, and a flag there is
        # the honest answer, so it is counted apart from the right answers.
        right = "ambiguous" if task.get("ambiguous") else "right"
        answers = {right: task["expected"], **wrong_answers(task, merge.text, rng)}
        for kind, answer in answers.items():
            found = answer_problems(task["original"], task["update"], answer, merge)
            counts[kind][0] += bool(found)
            counts[kind][1] += 1
            if not merge.exact:
                counts[kind][2] += bool(found)
                counts[kind][3] += 1
            rows.append(
                {
                    "id": task.get("id", ""),
                    "variant": task.get("kind", ""),
                    "kind": kind,
                    "merge_exact": merge.exact,
                    "flagged": bool(found),
                    "findings": found[:2],
                }
            )
    return dict(counts), rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tasks", nargs="+", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--show",
        default="",
        help="print the tasks of this kind the check gets "
        "wrong (right: flagged; other kinds: not flagged)",
    )
    args = ap.parse_args()
    tasks = [
        json.loads(line) for p in args.tasks for line in read_text(p).splitlines() if line.strip()
    ]
    counts, rows = evaluate(tasks, args.seed)
    if args.json:
        json.dump({"counts": counts, "rows": rows}, sys.stdout, indent=1)
        return 0
    print(
        f"{len(tasks)} tasks; answers the check flags suspect, of each kind (all tasks, and "
        "the tasks the merge is unsure of, where a model writes the answer under auto):"
    )
    print("| answer | flagged / all | share | flagged / unsure | share |")
    print("|---|---:|---:|---:|---:|")
    for kind in (
        "right",
        "ambiguous",
        "merge-wrong",
        "dropped",
        "lazy",
        "changed",
        "stale",
        "kept-old",
        "eaten",
        "left-out",
    ):
        f, n, fu, nu = counts.get(kind, [0, 0, 0, 0])
        print(f"| {kind} | {f} / {n} | {f / max(n, 1):.1%} | {fu} / {nu} | {fu / max(nu, 1):.1%} |")
    for r in rows:
        if args.show and r["kind"] == args.show and r["flagged"] == (args.show == "right"):
            print(r["id"], r["variant"], r["findings"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Accuracy of the model's own answers in bench results, and how the answer check judges them.

    python benchmarks/model_accuracy.py --tasks TASKS.jsonl [--mode spec-adaptive] RUN_DIR...

For the records of one mode (each task once: the first record wins) it counts exact,
whitespace-equal and token-equal answers, lazy ones (a marker line not in the original), and
answers that drop original lines outside the edit: a non-blank line the expected file keeps
from the original (an unchanged block of the original-to-expected diff) that the answer lacks.
It then re-runs today's answer check (`edge_spec.apply.check.verdict.answer_problems`) on every answer
and reports how often it calls right answers suspect (false alarms) and wrong ones not suspect
(misses), so a change to the check can be judged on real model answers.
"""

from __future__ import annotations

import argparse
import json
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from edge_spec.apply.check.verdict import answer_problems
from edge_spec.apply.merge import structural_merge
from edge_spec.bench.metrics import token_equal, ws_equal
from edge_spec.bench.modes import read_text


def dropped_kept_lines(original: str, expected: str, answer: str) -> int:
    """Non-blank lines the expected file keeps from the original that the answer lacks."""
    orig, exp, ans = original.split("\n"), expected.split("\n"), answer.split("\n")
    kept = [False] * len(exp)
    for op, _i1, _i2, j1, j2 in SequenceMatcher(None, orig, exp, autojunk=False).get_opcodes():
        if op == "equal":
            kept[j1:j2] = [True] * (j2 - j1)
    strip = [ln.rstrip() for ln in exp], [ln.rstrip() for ln in ans]
    lost = 0
    for op, i1, i2, _j1, _j2 in SequenceMatcher(None, *strip, autojunk=False).get_opcodes():
        if op in ("delete", "replace"):
            lost += sum(1 for i in range(i1, i2) if kept[i] and exp[i].strip())
    return lost


def score(task: dict[str, Any], rec: dict[str, Any]) -> dict[str, Any]:
    text = rec.get("text") or ""
    merge = structural_merge(
        task["original"], task["update"], task.get("language") or "", task.get("path")
    )
    found = answer_problems(task["original"], task["update"], text, merge)
    exact = text == task["expected"]
    return {
        "id": task["id"],
        "exact": exact,
        "ws": ws_equal(text, task["expected"]),
        "tokens": bool(
            token_equal(text, task["expected"], task.get("language") or "", task.get("path") or "")
        ),
        "lazy": bool(rec.get("lazy")),
        "finish": rec.get("finish_reason"),
        "dropped": dropped_kept_lines(task["original"], task["expected"], text),
        "suspect": bool(found),
        "finding": found[0] if found else "",
        "merge_exact": merge.exact,
    }


def results_file(run: Path) -> Path:
    """A bench output folder's results.json (or the .gz a kept result stores), or the file given."""
    if not run.is_dir():
        return run
    plain = run / "results.json"
    return plain if plain.exists() else run / "results.json.gz"


def load_records(
    tasks_path: Path, runs: list[Path], mode: str
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The tasks by id, and one bench record of `mode` per task: the first in `runs` wins."""
    tasks = {
        t["id"]: t for t in (json.loads(x) for x in read_text(tasks_path).splitlines() if x.strip())
    }
    recs: dict[str, dict[str, Any]] = {}
    for run in runs:
        for r in json.loads(read_text(results_file(run))):
            if r["mode"] == mode and r["task_id"] in tasks and not r.get("error"):
                recs.setdefault(r["task_id"], r)
    return tasks, recs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--tasks", type=Path, required=True)
    ap.add_argument("--mode", default="spec-adaptive")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tasks, recs = load_records(args.tasks, args.runs, args.mode)
    rows = [score(tasks[i], recs[i]) for i in tasks if i in recs]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    n = len(rows)
    wrong = [r for r in rows if not r["exact"]]
    print(f"{n} of {len(tasks)} tasks answered by mode {args.mode}")
    print("| exact | ws-equal | token-equal | lazy | dropped kept lines | budget hit |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {sum(r['exact'] for r in rows)} | {sum(r['ws'] for r in rows)} | "
        f"{sum(r['tokens'] for r in rows)} | {sum(r['lazy'] for r in rows)} | "
        f"{sum(r['dropped'] > 0 for r in rows)} | "
        f"{sum(r['finish'] == 'length' for r in rows)} |"
    )
    right = [r for r in rows if r["exact"]]
    print(
        f"answer check: {sum(r['suspect'] for r in right)} of {len(right)} right answers "
        f"flagged suspect, {sum(not r['suspect'] for r in wrong)} of {len(wrong)} wrong ones "
        "not flagged"
    )
    for r in wrong:
        if not r["suspect"]:
            print("  not flagged:", r["id"], "dropped", r["dropped"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

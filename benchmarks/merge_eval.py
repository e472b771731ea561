"""Score the structural merge on code-apply tasks: how often it is sure, and sure and right.

    python benchmarks/merge_eval.py TASKS.jsonl [TASKS2.jsonl ...] [--json] [--show-wrong]
                                    [--scale LINES] [--repeat N] [--split dev|heldout|all]
                                    [--named named|unnamed|no-grammar]

Each task has `original`, `update` (the snippet), `expected`, `language`, `path`, `id` and
optionally `kind`. Counts: exact-and-correct, exact-but-WRONG (a silent corruption; must be 0),
ambiguous, unplaced (some hunk could not be placed), correct-overall (merged text == expected
whatever the verdict), the same correctness ignoring whitespace, per `kind` when present, and the
median and p95 merge time (the fastest of `--repeat` runs per task). `--scale 2000` embeds
each original among the other originals of its language (2,000+ lines, the same edit).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from edge_spec.apply.merge import MergeResult, structural_merge
from edge_spec.bench.modes import read_text

_COLUMNS = (
    "tasks",
    "exact_correct",
    "exact_WRONG",
    "ambiguous",
    "unplaced",
    "correct",
    "correct_ws",
)


def _squash(text: str) -> str:
    """The text without whitespace and byte order marks: what `correct_ws` compares."""
    return "".join(text.replace("\ufeff", "").split())


def _verdict(result: MergeResult) -> str:
    if result.exact:
        return "exact"
    if any(h.status == "unplaced" for h in result.hunks) or not result.hunks:
        return "unplaced"
    return "ambiguous"


def run_task(task: dict[str, Any], repeat: int = 1, named: str = "named") -> dict[str, Any]:
    """`named`: "named" gives the task's language and path, "unnamed" neither (stdin, a temp
    file: the merge goes by the content), "no-grammar" a language with no grammar."""
    lang, path = {
        "named": (task.get("language") or "", task.get("path")),
        "unnamed": ("", None),
        "no-grammar": ("no-grammar", None),
    }[named]
    ms = float("inf")
    for _ in range(max(1, repeat)):  # the fastest of a few: a shared machine adds noise
        start = time.perf_counter()
        result = structural_merge(task["original"], task["update"], lang, path)
        ms = min(ms, (time.perf_counter() - start) * 1000)
    verdict = _verdict(result)
    # A task whose snippet has no one right reading (`ambiguous`) is right only when refused.
    correct = result.text == task["expected"] and not task.get("ambiguous")
    reasons = [h.reason for h in result.hunks if h.status != "exact"]
    return {
        "id": task.get("id", ""),
        "kind": task.get("kind") or task.get("style", ""),
        "verdict": verdict,
        "correct": correct,
        "correct_ws": _squash(result.text) == _squash(task["expected"]),
        "ms": ms,
        "reason": reasons[0] if reasons else "",
    }


def scaled(tasks: list[dict[str, Any]], lines: int) -> list[dict[str, Any]]:
    """Each task with its file embedded in the middle of other files of its language, until the
    original has at least `lines` lines: the same edit on a file of that size."""
    out = []
    for t in tasks:
        others = [
            o["original"] for o in tasks if o.get("language") == t.get("language") and o is not t
        ]
        head: list[str] = []
        tail: list[str] = []
        k = 0
        while others and (len(head) + len(tail) + t["original"].count("\n")) < lines:
            (head if k % 2 == 0 else tail).extend(others[k % len(others)].splitlines())
            k += 1
        top = "\n".join(head) + "\n" if head else ""
        bottom = "\n".join(tail) + "\n" if tail else ""
        out.append(
            {
                **t,
                "original": top + t["original"] + bottom,
                "expected": top + t["expected"] + bottom,
            }
        )
    return out


def _tally(rows: list[dict[str, Any]]) -> dict[str, int]:
    out = dict.fromkeys(_COLUMNS, 0)
    for r in rows:
        out["tasks"] += 1
        if r["verdict"] == "exact":
            out["exact_correct" if r["correct"] else "exact_WRONG"] += 1
        else:
            out[r["verdict"]] += 1
        out["correct"] += r["correct"]
        out["correct_ws"] += r["correct_ws"]
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["kind"]:
            by_kind[r["kind"]].append(r)
    times = sorted(r["ms"] for r in rows)
    p95 = times[min(len(times) - 1, int(0.95 * len(times)))] if times else 0.0
    return {
        "total": _tally(rows),
        "by_kind": {k: _tally(v) for k, v in sorted(by_kind.items())},
        "median_ms": round(statistics.median(times), 2) if times else 0.0,
        "p95_ms": round(p95, 2),
    }


def _table(summary: dict[str, Any]) -> str:
    head = f"{'':18}" + "".join(f"{c:>14}" for c in _COLUMNS)
    lines = [head]
    for name, tally in [("total", summary["total"]), *summary["by_kind"].items()]:
        lines.append(f"{name:18}" + "".join(f"{tally[c]:>14}" for c in _COLUMNS))
    lines.append(f"median {summary['median_ms']} ms, p95 {summary['p95_ms']} ms")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument(
        "--show-wrong",
        action="store_true",
        help="list tasks that are not exact-and-correct, with the reason",
    )
    parser.add_argument(
        "--scale",
        type=int,
        default=0,
        metavar="LINES",
        help="embed each file among others of its language to >= LINES lines",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="time each merge this many times and keep the fastest"
    )
    parser.add_argument(
        "--split",
        choices=("dev", "heldout", "all"),
        default="all",
        help="tasks of this `split` only (tasks without one count as dev)",
    )
    parser.add_argument(
        "--named",
        choices=("named", "unnamed", "no-grammar"),
        default="named",
        help="give the merge the task's language and path, neither, or a "
        "language without a grammar",
    )
    args = parser.parse_args(argv)
    tasks = [
        json.loads(line)
        for path in args.tasks
        for line in read_text(path).splitlines()
        if line.strip()
    ]
    tasks = [
        t
        for t in tasks
        if args.split in ("all", t.get("split", "dev")) and t.get("faithful", True) is not False
    ]
    if args.scale:
        tasks = scaled(tasks, args.scale)
    rows = [run_task(t, args.repeat, args.named) for t in tasks]
    summary = summarise(rows)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(_table(summary))
    if args.show_wrong:
        for r in rows:
            if not (r["verdict"] == "exact" and r["correct"]):
                flag = "WRONG " if r["verdict"] == "exact" else ""
                print(
                    f"{flag}{r['id']:28} {r['kind']:16} {r['verdict']:9} "
                    f"correct={r['correct']!s:5} {r['reason']}",
                    file=sys.stderr,
                )
    return 1 if summary["total"]["exact_WRONG"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""Which original lines a hunk's context stands on: the surest anchors outweigh recurring runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge_spec.apply.merge import structural_merge
from edge_spec.apply.merge.anchors import LineIndex, find_blocks, norm

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"


def _task(name: str, task_id: str) -> dict:
    for line in (DATA / name).read_text().splitlines():
        task = json.loads(line)
        if task["id"] == task_id:
            assert task.get("split", "dev") == "dev"
            return task
    raise KeyError(task_id)


def test_a_line_once_in_each_text_weighs_more_than_one_the_hunk_repeats() -> None:
    index = LineIndex(["start()", "helper(a)", "end()"])
    once = [norm(x) for x in ("start()", "helper(a)")]
    twice = [norm(x) for x in ("start()", "helper(a)", "helper(a)")]
    w_once = {b.j: b.w for b in find_blocks(once, index, 0, len(index))}
    w_twice = {b.j: b.w for b in find_blocks(twice, index, 0, len(index))}
    # In the second hunk "helper(a)" recurs: only "start()" is a sure anchor there.
    assert w_once[0] > w_twice[0]


@pytest.mark.parametrize(
    "task_id",
    [
        # A table's entries sorted: shown in a new order, between lines once in each text.
        "plenary.nvim-a3dafaa-0",
        # An install script rewritten between context lines once in each text.
        "bats-core-a807025-0",
    ],
)
def test_recurring_runs_do_not_outweigh_unique_anchors(task_id: str) -> None:
    task = _task("code_apply_mined.jsonl", task_id)
    for lang, path in ((task["language"], task["path"]), ("", None)):
        merge = structural_merge(task["original"], task["update"], lang, path)
        assert merge.exact, [h.reason for h in merge.hunks]
        assert merge.text == task["expected"]

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
    ("name", "task_id"),
    [
        # An install script rewritten between context lines once in each text.
        ("code_apply_mined.jsonl", "bats-core-a807025-0"),
        # A new test after the last one: the line above it is once in each text, while a line
        # inside the new test (`class G : OptionGroup() {`) stands in an older test further up.
        ("code_apply_mined2.jsonl", "clikt-8557034-0"),
    ],
)
def test_recurring_runs_do_not_outweigh_unique_anchors(name: str, task_id: str) -> None:
    task = _task(name, task_id)
    for lang, path in ((task["language"], task["path"]), ("", None)):
        merge = structural_merge(task["original"], task["update"], lang, path)
        assert merge.exact, [h.reason for h in merge.hunks]
        assert merge.text == task["expected"]


def test_only_a_hunks_outer_lines_take_the_anchor_weight() -> None:
    # A line inside a hunk that the original has elsewhere may be moved code; the hunk joins
    # the file at its outer context lines.
    lines = [f"call_{k}(arg)" for k in range(5)]
    index = LineIndex(lines)
    (block,) = find_blocks([norm(x) for x in lines], index, 0, len(index))
    assert block.n == 5
    assert block.w == pytest.approx(5 + 4)  # two outer lines at each end, not the middle one

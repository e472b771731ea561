"""Tasks of the committed benchmark sets for tests: dev tasks only, never a held-out one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from edge_spec.apply.merge import structural_merge

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data"


def dev_task(name: str, task_id: str) -> dict[str, Any]:
    """The task `task_id` of set `name`, which must be a dev task."""
    for line in (DATA / name).read_text().splitlines():
        task = json.loads(line)
        if task["id"] == task_id:
            assert task.get("split", "dev") == "dev", task_id
            return task
    raise KeyError(task_id)


def assert_sure_and_right(task: dict[str, Any], ws: bool = False) -> None:
    """The merge is sure of the task and writes its expected file, with and without the file's
    extension (`ws`: up to trailing whitespace)."""
    for lang, path in ((task["language"], task["path"]), ("", None)):
        merge = structural_merge(task["original"], task["update"], lang, path)
        assert merge.exact, [h.reason for h in merge.hunks]
        if ws:
            got = [ln.rstrip() for ln in merge.text.split("\n")]
            assert got == [ln.rstrip() for ln in task["expected"].split("\n")]
        else:
            assert merge.text == task["expected"]

"""What the user gets, as `edge-spec bench` reports it: outcome per apply, end-to-end seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from edge_spec.bench.modes import RESULT_FIELDS
from edge_spec.bench.outcome import OUTCOMES, classify, layout_equal, outcome_table, user_outcome
from edge_spec.cli.main import main

FNS = "".join(f"def f{i}(x):\n    y = x + {i}\n    return y\n\n\n" for i in range(12))
CLASSES = "".join(
    f"class {c}:\n    def run(self):\n        total = 0\n        total += 1\n"
    "        return total\n\n\n"
    for c in "AB"
)
ORIG = "import os\n\n\n" + FNS + CLASSES.rstrip("\n") + "\n"
# A whole definition by name: the merge is sure of it.
SURE = (
    "# ... existing code ...\ndef f1(x):\n    y = x + 100\n    return y\n# ... existing code ...\n"
)
SURE_EXPECTED = ORIG.replace("y = x + 1\n", "y = x + 100\n")
# The `run` edit fits class A and class B: unsure, placed, a window around it (by region).
UNSURE = (
    "# ... existing code ...\n    def run(self):\n        total = 0\n        total += 2\n"
    "        return total\n"
)
UNSURE_EXPECTED = ORIG[: ORIG.index("class B:")] + ORIG[ORIG.index("class B:") :].replace(
    "total += 1", "total += 2"
)


def _task(tid: str, update: str, expected: str) -> dict[str, str]:
    return {
        "id": tid,
        "language": "python",
        "path": "m.py",
        "original": ORIG,
        "update": update,
        "expected": expected,
        "instruction": "Edit the code",
    }


def _write(path: Path, tasks: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def test_classify_each_outcome() -> None:
    exp = "def f():\n    return 1\n"
    assert classify(exp, exp, refused=False, warned=False) == "right"
    assert classify(exp, exp, refused=False, warned=True) == "right"  # right despite a warning
    assert classify("def f():  \n\n    return 1\n", exp, refused=False, warned=False) == "right_ws"
    # Indentation is not layout: a re-indented body is a wrong file.
    assert classify("def f():\n  return 1\n", exp, refused=False, warned=False) == "wrong_silent"
    assert classify("def f():\n    return 2\n", exp, refused=False, warned=True) == "wrong_flagged"
    assert classify("def f():\n    return 2\n", exp, refused=False, warned=False) == "wrong_silent"
    assert classify(exp, exp, refused=True, warned=False) == "refused"
    assert classify(None, exp, refused=False, warned=False) is None
    assert classify(exp, None, refused=False, warned=False) is None
    assert not layout_equal("a\nb\n", "a b\n") and layout_equal("a\r\nb", "a\n\nb\n")
    assert set(OUTCOMES) == {"right", "right_ws", "wrong_flagged", "wrong_silent", "refused"}


def test_user_outcome_reads_the_record_as_edge_spec_run_would() -> None:
    exp = "x = 1\n"
    ok = {"text": exp, "suspect": [], "lazy_lines": [], "fallback": None, "error": None}
    assert user_outcome(ok, exp) == {"outcome": "right", "refused_right": None, "warned": False}
    # The check held back a right answer: refused, and the refusal counted as right.
    held = {**ok, "suspect": ["the answer is the structural merge's own guess"]}
    assert user_outcome(held, exp) == {"outcome": "refused", "refused_right": True, "warned": None}
    assert user_outcome({**held, "text": "x = 2\n"}, exp)["refused_right"] is False
    naive = {**ok, "text": "x = 2\n", "lazy_lines": [3], "fallback": "naive"}
    assert user_outcome(naive, exp)["outcome"] == "wrong_flagged"
    doubted = {**ok, "warnings": ["the file no longer has function f"]}
    assert user_outcome({**doubted, "text": "x = 2\n"}, exp)["outcome"] == "wrong_flagged"
    assert user_outcome(doubted, exp) == {"outcome": "right", "refused_right": None, "warned": True}
    said_no = {"error": "UserError: hunk 1 is ambiguous", "refusal": "hunk 1 is ambiguous"}
    assert user_outcome(said_no, exp) == {
        "outcome": "refused",
        "refused_right": None,
        "warned": None,
    }
    # Where the snippet does not say where its code goes, saying no holds back nothing right.
    assert user_outcome(held, exp, ambiguous=True)["refused_right"] is False
    crash = {"error": "KeyError: 'prompt'"}
    assert user_outcome(crash, exp)["outcome"] is None


def test_outcome_table_counts_and_seconds_per_path() -> None:
    recs = [
        {"mode": "plain", "outcome": "right", "engine_used": "merge", "e2e_ms": ms}
        for ms in (1.0, 2.0, 3.0)
    ]
    recs += [
        {
            "mode": "plain",
            "outcome": "refused",
            "refused_right": True,
            "engine_used": "region",
            "e2e_ms": 4000.0,
        },
        {"mode": "plain", "outcome": "wrong_silent", "engine_used": "model", "e2e_ms": 6000.0},
        {"mode": "plain", "outcome": None, "engine_used": None, "e2e_ms": None},
        {"mode": "llamacpp-pld", "outcome": None, "engine_used": None, "e2e_ms": 9.0},
    ]
    table = outcome_table(recs)
    assert list(table) == ["plain"]  # a peer writes no file of ours
    t = table["plain"]
    assert (
        t["runs"],
        t["right"],
        t["refused"],
        t["refused_right"],
        t["wrong_silent"],
        t["unjudged"],
    ) == (6, 3, 1, 1, 1, 1)
    assert t["e2e"]["merge"] == {"n": 3, "p50_s": 0.002, "p95_s": 0.003}
    assert t["e2e"]["model"] == {"n": 2, "p50_s": 5.0, "p95_s": 5.9}
    assert t["e2e"]["all"]["n"] == 5 and t["e2e"]["all"]["p50_s"] == 0.003


def test_bench_merge_only_never_loads_a_model(tmp_path: Path) -> None:
    """A sure merge through `edge-spec bench`: the model named does not even exist."""
    right_ws = SURE_EXPECTED.replace("import os\n", "import os   \n\n")
    tasks = _write(
        tmp_path / "set.jsonl",
        [
            _task("sure", SURE, SURE_EXPECTED),
            _task("sure-ws", SURE, right_ws),
            _task("sure-but-other", SURE, UNSURE_EXPECTED),
            _task("unsure", UNSURE, UNSURE_EXPECTED),
        ],
    )
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main,
        [
            "bench",
            "--tasks",
            str(tasks),
            "--engine",
            "merge",
            "--model",
            str(tmp_path / "absent.gguf"),
            "--profile",
            "none",
            "--modes",
            "plain",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    records = json.loads((out / "results.json").read_text())
    assert all(f in r for r in records for f in RESULT_FIELDS)
    got = {r["task_id"]: (r["outcome"], r["engine_used"]) for r in records}
    assert got == {
        "sure": ("right", "merge"),
        "sure-ws": ("right_ws", "merge"),
        "sure-but-other": ("wrong_silent", "merge"),
        "unsure": ("refused", "merge"),
    }
    assert all(r["e2e_ms"] is not None and r["e2e_ms"] < 60_000 for r in records)
    refusal = next(r for r in records if r["task_id"] == "unsure")
    assert "ambiguous" in refusal["refusal"] and refusal["refused_right"] is None
    table = json.loads(res.stdout)["outcomes"]["set"]["plain"]
    assert (table["right"], table["right_ws"], table["wrong_silent"], table["refused"]) == (
        1,
        1,
        1,
        1,
    )
    assert table["e2e"]["merge"]["n"] == 4 and table["e2e"]["model"]["n"] == 0
    md = (out / "summary.md").read_text()
    assert "## What the user gets: set, --engine merge" in md
    assert "| plain | 4 | 1 | 1 | 0 | 1 | 1 (0) | 0 |" in md
    # --engine auto, where the merge is sure of every task: still no model.
    sure = _write(tmp_path / "sure.jsonl", [_task("sure", SURE, SURE_EXPECTED)])
    res = CliRunner().invoke(
        main,
        [
            "bench",
            "--tasks",
            str(sure),
            "--engine",
            "auto",
            "--model",
            str(tmp_path / "absent.gguf"),
            "--profile",
            "none",
            "--modes",
            "plain,spec-adaptive",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    records = json.loads((out / "results.json").read_text())
    assert [(r["outcome"], r["engine_used"], r["error"]) for r in records] == [
        ("right", "merge", None)
    ] * 2


@pytest.mark.real
@pytest.mark.parametrize("engine", ["auto", "region"])
def test_bench_auto_by_region_smollm2(smollm2_path: Path, tmp_path: Path, engine: str) -> None:
    """--engine auto (the target may choose among the readings) and region (the model writes
    the window) on a task the merge is unsure of: no crash, the outcome recorded."""
    tasks = _write(
        tmp_path / "region.jsonl",
        [_task("sure", SURE, SURE_EXPECTED), _task("unsure", UNSURE, UNSURE_EXPECTED)],
    )
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main,
        [
            "bench",
            "--tasks",
            str(tasks),
            "--engine",
            engine,
            "--model",
            str(smollm2_path),
            "--profile",
            "none",
            "--modes",
            "plain,spec-adaptive",
            "--n-ctx",
            "4096",
            "--threads",
            "2",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    records = json.loads((out / "results.json").read_text())
    assert len(records) == 4
    for r in records:
        assert not r["error"], r["error"]
        assert r["outcome"] in OUTCOMES and r["e2e_ms"] > 0
    by = {(r["task_id"], r["mode"]): r for r in records}
    assert by[("sure", "plain")]["engine_used"] == "merge"
    assert by[("sure", "plain")]["outcome"] == "right"
    region = by[("unsure", "plain")]
    assert region["engine_used"] in (("choice", "region") if engine == "auto" else ("region",))
    if region["engine_used"] == "region":
        assert region["regions"] and region["output_ids"]
    table = json.loads(res.stdout)["outcomes"]["region"]
    for mode in ("plain", "spec-adaptive"):
        assert table[mode]["runs"] == 2 and table[mode]["e2e"]["model"]["n"] == 1
        assert sum(table[mode][o] for o in OUTCOMES) == 2
    assert f"## What the user gets: region, --engine {engine}" in (out / "summary.md").read_text()

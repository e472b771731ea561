"""The messy-snippet generator (benchmarks/messy_generate.py) on three dev-small tasks."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "benchmarks" / "messy_generate.py"
TASKS = ROOT / "benchmarks" / "data" / "code_apply_dev_small.jsonl"
# python, javascript and go; the last two have a variant of every kind
TASK_IDS = ("click-3b16957-0", "express-59e205a-0", "cobra-511af59-0")


@pytest.fixture(scope="module")
def generator():
    name = "messy_generate_under_test"
    spec = importlib.util.spec_from_file_location(name, GENERATOR)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)


@pytest.fixture(scope="module")
def tasks() -> list[dict]:
    with TASKS.open(encoding="utf-8") as handle:
        records = {record["id"]: record for record in map(json.loads, handle)}
    return [records[task_id] for task_id in TASK_IDS]


@pytest.fixture(scope="module")
def variants(generator, tasks) -> list[dict]:
    out, _, _ = generator.generate(tasks, seed=0)
    return out


def test_same_seed_same_bytes(generator, tasks, variants):
    again, _, _ = generator.generate(tasks, seed=0)
    assert [json.dumps(v) for v in again] == [json.dumps(v) for v in variants]
    other, _, _ = generator.generate(tasks, seed=1)
    assert [v["update"] for v in other] != [v["update"] for v in variants]


def test_every_kind_present_and_differs_from_canonical(generator, tasks, variants):
    by_id = {task["id"]: task for task in tasks}
    assert {v["kind"] for v in variants} == set(generator.KINDS)
    for variant in variants:
        task = by_id[variant["variant_of"]]
        assert variant["id"] == f"{task['id']}~{variant['kind']}"
        assert variant["update"] != task["update"], variant["id"]
        assert variant["expected"] == task["expected"]
        assert variant["original"] == task["original"]
        assert list(variant) == [*task, "kind", "variant_of"]


def test_code_lines_come_from_the_files(generator, tasks, variants):
    by_id = {task["id"]: task for task in tasks}
    for variant in variants:
        task = by_id[variant["variant_of"]]
        known = set(task["original"].splitlines()) | set(task["expected"].splitlines())
        markers = 0
        for line in variant["update"].split("\n")[:-1]:
            line = line.rstrip("\r")
            if variant["kind"] == "crlf_tabs":
                line = line.rstrip(" \t")
            if generator.is_marker(line, task["language"]):
                markers += 1
            else:
                assert line in known, (variant["id"], line)
        assert markers >= 1 or variant["kind"] == "no_ends", variant["id"]


def test_crlf_variants_have_crlf(variants):
    crlf = [v for v in variants if v["kind"] == "crlf_tabs"]
    assert len(crlf) == len(TASK_IDS)
    for variant in crlf:
        assert "\r\n" in variant["update"]
        assert "\r" not in variant["expected"]

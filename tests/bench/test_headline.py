"""README.md's numbers table is what benchmarks/headline.py reads from benchmarks/results."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "headline.py"


def test_readme_table_equals_the_results() -> None:
    spec = importlib.util.spec_from_file_location("headline", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["headline"] = module
    spec.loader.exec_module(module)
    assert module.main(["--check"]) == 0, "run: python benchmarks/headline.py --write"

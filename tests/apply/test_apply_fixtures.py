"""Golden merge cases as data: `tests/fixtures/apply/<case>/`, one folder per case.

Each folder holds `case.toml` (`why`: what the case pins down; `path`: the file name the merge
is given, or `lang`: the language named; `expect`: "exact", the merge is sure and writes `expected.txt`, or "unsure", it must
not be sure; `without_path`: the same holds when no file name is given), `original.txt`,
`snippet.txt` and, for "exact", `expected.txt`. Files are read as bytes decoded as UTF-8, so
line ends and trailing blanks are the case's own. A new case is a new folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

from edge_spec.apply.merge import structural_merge

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "apply"
_KEYS = {"why", "path", "lang", "expect", "without_path"}


def _read(folder: Path, name: str) -> str:
    return (folder / name).read_bytes().decode("utf-8")


def _cases() -> list[Path]:
    return sorted(p for p in CASES.iterdir() if (p / "case.toml").is_file())


@pytest.mark.parametrize("folder", _cases(), ids=lambda p: p.name)
def test_golden_merge(folder: Path) -> None:
    case = tomllib.loads(_read(folder, "case.toml"))
    assert set(case) <= _KEYS and case.get("why") and case["expect"] in ("exact", "unsure"), case
    original, snippet = _read(folder, "original.txt"), _read(folder, "snippet.txt")
    paths = [case.get("path")] + ([None] if case.get("without_path") else [])
    for path in paths:
        result = structural_merge(original, snippet, case.get("lang", ""), path=path)
        if case["expect"] == "exact":
            assert result.exact, (path, result.hunks)
            assert result.text == _read(folder, "expected.txt"), path
        else:
            assert not result.exact, (path, result.text)

"""The architecture as tests: one layer order (import-linter), typed core (mypy), no hidden imports.

`export/` and `runtimes/` install as `edge_spec.export` / `edge_spec.runtimes` through setuptools'
package-dir mapping, which import-linter's module walk cannot see; the check runs on a copy of the
sources laid out as the installed package.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[1]
MAPPED = ("export", "runtimes", "profiles")
# Imports of edge_spec modules inside functions are allowed only where the module needs an
# optional heavy extra, so a base install and `edge-spec --version` never load it.
LAZY_ALLOWED = {"edge_spec.server.app", "edge_spec.server.cluster", "edge_spec.export.onnx"}


def _bin(name: str) -> str:
    exe = Path(sys.executable).parent / name
    if not exe.exists():
        pytest.skip(f"{name} is not installed (pip install 'edge-spec[dev]')")
    return str(exe)


def _installed_layout(tmp: Path) -> Path:
    root = tmp / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "edge_spec", root / "edge_spec", ignore=skip)
    for name in MAPPED:
        shutil.copytree(REPO / name, root / "edge_spec" / name, ignore=skip)
    return root


def test_layers_point_one_way(tmp_path: Path) -> None:
    exe = _bin("lint-imports")
    root = _installed_layout(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(root)}
    res = subprocess.run(
        [exe, str(REPO / "pyproject.toml"), "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    assert f"Contracts: {len(contracts)} kept, 0 broken" in res.stdout, res.stdout[-2000:]


def test_mypy_on_the_core(tmp_path: Path) -> None:
    exe = _bin("mypy")
    root = _installed_layout(tmp_path)
    env = {**os.environ, "MYPYPATH": str(root)}
    res = subprocess.run(
        [
            exe,
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-6000:]


def _function_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("edge_spec"):
                    out.append((node.lineno, node.module or ""))
                elif isinstance(node, ast.Import):
                    out += [
                        (node.lineno, a.name) for a in node.names if a.name.startswith("edge_spec")
                    ]
    return out


def test_no_edge_spec_imports_inside_functions() -> None:
    bad = []
    for folder in ("edge_spec", *MAPPED):
        for path in sorted((REPO / folder).rglob("*.py")):
            for line, mod in _function_imports(path):
                if mod not in LAZY_ALLOWED:
                    bad.append(f"{path.relative_to(REPO)}:{line}: {mod}")
    assert not bad, "imports inside functions:\n" + "\n".join(bad)

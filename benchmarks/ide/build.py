#!/usr/bin/env python3
"""Build benchmarks/data/code_apply_ide.jsonl from the hand-made tasks in benchmarks/ide/*.toml.

    python benchmarks/ide/build.py [--mined benchmarks/data/code_apply_mined.jsonl]
                                   [--out benchmarks/data/code_apply_ide.jsonl]

Each task names a `base` task of the mined set; its `expected` file is this task's `original`.
The task's `edit` rows (`old` -> `new`, each `old` found exactly once in the file being edited,
applied in order) make `expected`; `update` is the snippet as written in the TOML. Checks, so a
typo in a hand-written task fails the build: every `old` is unique, the edit changes the file,
and every non-marker snippet line occurs (stripped) in `expected`. `split` holds out a third of
each style (see `assign_splits`). Standard library only; the same inputs give the same file byte
for byte.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

try:  # the standard library from Python 3.11; tomli (the same parser) before
    import tomllib
except ImportError:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"

_MARKER = re.compile(r"\.\.\.|rest of (the )?code")


def _is_marker(line: str) -> bool:
    text = line.strip()
    return (
        bool(text)
        and text.startswith(("#", "//", "/*", "--", "<!--"))
        and bool(_MARKER.search(text))
    )


def build_task(spec: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    original = base["expected"]
    text = original
    for edit in spec["edit"]:
        count = text.count(edit["old"])
        if count != 1:
            raise ValueError(f"{spec['id']}: an edit's old text occurs {count} times")
        text = text.replace(edit["old"], edit["new"])
    if text == original:
        raise ValueError(f"{spec['id']}: the edits change nothing")
    lines = {ln.strip() for ln in text.splitlines()}
    for ln in spec["update"].splitlines():
        if ln.strip() and not _is_marker(ln) and ln.strip() not in lines:
            raise ValueError(f"{spec['id']}: snippet line not in expected: {ln!r}")
    diff = difflib.SequenceMatcher(None, original.splitlines(), text.splitlines(), autojunk=False)
    changed = sum(
        max(i2 - i1, 0) + max(j2 - j1, 0)
        for tag, i1, i2, j1, j2 in diff.get_opcodes()
        if tag != "equal"
    )
    return {
        "id": spec["id"],
        "repo": base["repo"],
        "commit": base["commit"],
        "path": base["path"],
        "language": base["language"],
        "instruction": spec["instruction"],
        "original": original,
        "update": spec["update"],
        "expected": text,
        "style": spec["style"],
        "ambiguous": bool(spec.get("ambiguous", False)),
        "base": base["id"],
        "split": "dev",
        "stats": {"original_lines": original.count("\n"), "changed_lines": changed},
    }


def assign_splits(tasks: list[dict[str, Any]], seed: int = 0) -> None:
    """Hold out a third of each style (at least one), the ids first by sha256(seed/id): a
    held-out part without some style could not tell whether what was tuned carries over."""
    styles: dict[str, list[dict[str, Any]]] = {}
    for t in tasks:
        styles.setdefault(t["style"], []).append(t)
    for group in styles.values():
        group.sort(key=lambda t: hashlib.sha256(f"{seed}/{t['id']}".encode()).hexdigest())
        for t in group[: max(1, round(len(group) / 3))]:
            t["split"] = "heldout"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mined", type=Path, default=DATA / "code_apply_mined.jsonl")
    p.add_argument("--out", type=Path, default=DATA / "code_apply_ide.jsonl")
    args = p.parse_args(argv)
    bases = {t["id"]: t for t in map(json.loads, args.mined.read_text("utf-8").splitlines())}
    specs = [
        s
        for f in sorted(HERE.glob("tasks_*.toml"))
        for s in tomllib.loads(f.read_text("utf-8"))["task"]
    ]
    try:
        tasks = [build_task(s, bases[s["base"]]) for s in specs]
    except (ValueError, KeyError) as exc:
        print(f"bad task: {exc}", file=sys.stderr)
        return 2
    assign_splits(tasks)
    args.out.write_text(
        "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8"
    )
    print(f"{len(tasks)} tasks -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

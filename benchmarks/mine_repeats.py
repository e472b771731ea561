#!/usr/bin/env python3
"""Mine sequences of apply tasks that repeat one change: commits that edit several files alike.

    python benchmarks/mine_repeats.py GIT_DIR --repo OWNER/NAME [--min-files 3] [--max-files 4]
        [--max-commit-files 12] [--min-lines 12] [--max-lines 80] [--max-changed 24]
        [--max-hunks 3] [--min-shared 1] [--limit 4] [--seed 0] >> SEQUENCES.jsonl

A commit qualifies when at least `--min-files` of the files it modifies (of a known language,
within the size limits of `benchmarks/mine_commits.py`) share an added line: the same
non-blank line (ignoring indentation, at least 8 characters) added in each, as a rename, a
signature change or a moved import writes it. Of each such commit, up to `--max-files` of those
files become one sequence, in path order: one apply task per file (`original`, `update`,
`expected` as `mine_commits.py` builds them), `sequence` naming the commit and `order` the
file's place in it, to be replayed in that order through one engine. `--limit` commits are
drawn per repository with a `random.Random(seed/repo)`; `split` is `heldout` for about a third
of the sequences (by a seeded hash of the sequence id, so every task of one sequence shares it).

Standard library and the `git` command only.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from collections import Counter
from typing import Any

from mine_commits import _commits, _text, build_update, language_of, split_of

_MIN_LINE = 8  # shorter added lines (`}`, `return x`) recur by chance


def _added(original: str, expected: str) -> set[str]:
    before = Counter(ln.strip() for ln in original.splitlines())
    after = Counter(ln.strip() for ln in expected.splitlines())
    return {ln for ln, n in after.items() if len(ln) >= _MIN_LINE and n > before.get(ln, 0)}


def _file_task(gitdir: str, sha: str, path: str, opts: argparse.Namespace) -> dict[str, Any] | None:
    original = _text(gitdir, f"{sha}^", path)
    expected = _text(gitdir, sha, path) if original is not None else None
    if original is None or expected is None or original == expected:
        return None
    language = language_of(path, original, {})
    if language is None:
        return None
    olines, elines = original.splitlines(), expected.splitlines()
    if not opts.min_lines <= len(olines) <= opts.max_lines or len(elines) > opts.max_lines:
        return None
    if not (original.endswith("\n") and expected.endswith("\n")):
        return None
    update, hunks, changed = build_update(olines, elines, language, opts.context)
    if hunks > opts.max_hunks or not 1 <= changed <= opts.max_changed:
        return None
    return {
        "path": path,
        "language": language,
        "original": original,
        "update": update,
        "expected": expected,
        "stats": {"original_lines": len(olines), "changed_lines": changed, "hunks": hunks},
        "_added": _added(original, expected),
    }


def sequences(gitdir: str, repo: str, opts: argparse.Namespace) -> list[list[dict[str, Any]]]:
    found = []
    for sha, subject, files in _commits(gitdir, False):
        if not opts.min_files <= len(files) <= opts.max_commit_files:
            continue
        tasks = [t for _, _, p in files if (t := _file_task(gitdir, sha, p, opts)) is not None]
        counts = Counter(ln for t in tasks for ln in t["_added"])
        shared = {ln for ln, n in counts.items() if n >= 2}
        alike = [t for t in tasks if len(t["_added"] & shared) >= opts.min_shared]
        if len(alike) < opts.min_files:
            continue
        alike = sorted(alike, key=lambda t: t["path"])[: opts.max_files]
        for t in alike:
            t.update(repo=repo, commit=sha, instruction=subject)
            t["stats"]["shared_added_lines"] = len(t["_added"] & shared)
        found.append(alike)
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("gitdir")
    p.add_argument("--repo", required=True, help="GitHub owner/name, recorded in each task")
    p.add_argument("--min-files", type=int, default=3)
    p.add_argument("--max-files", type=int, default=4, help="files per sequence")
    p.add_argument("--max-commit-files", type=int, default=12)
    p.add_argument("--min-lines", type=int, default=12)
    p.add_argument("--max-lines", type=int, default=80)
    p.add_argument("--max-changed", type=int, default=24)
    p.add_argument("--max-hunks", type=int, default=3)
    p.add_argument("--min-shared", type=int, default=1, help="shared added lines per file")
    p.add_argument("--context", type=int, default=3)
    p.add_argument("--limit", type=int, default=4, help="sequences per repository")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        subprocess.run(
            ["git", "--git-dir", args.gitdir, "rev-parse", "HEAD"], check=True, capture_output=True
        )
    except (subprocess.CalledProcessError, FileNotFoundError):
        print(f"{args.gitdir}: not a git directory with a HEAD", file=sys.stderr)
        return 2
    found = sequences(args.gitdir, args.repo, args)
    rng = random.Random(f"{args.seed}/{args.repo}")
    rng.shuffle(found)
    chosen = sorted(found[: args.limit], key=lambda s: s[0]["commit"])
    short = args.repo.split("/")[-1].lower()
    for seq in chosen:
        seq_id = f"{short}-{seq[0]['commit'][:7]}"
        split = split_of(seq_id, args.seed)
        for n, task in enumerate(seq):
            task.pop("_added")
            record = {"id": f"{seq_id}-{n}", "sequence": seq_id, "order": n, **task}
            record["split"] = split
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"{args.repo}: {len(found)} sequences found, {len(chosen)} drawn", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Mine code-apply tasks from the git history of a repository (a bare git dir is enough).

    python benchmarks/mine_commits.py GIT_DIR --repo OWNER/NAME [--max-lines 300]
        [--min-changed 3] [--max-changed 40] [--max-hunks 3] [--limit 12] [--per-language 8]
        [--aux-per-language 1] [--context 3] [--ext-lang .h=cpp] [--only LANG ...] [--seed 0]
        [--first-parent] >> TASKS.jsonl

Walks the commits reachable from HEAD (merges skipped: their edits are their branches' commits;
with `--first-parent` HEAD's first parents only) and keeps, per commit, at most one file that
both versions hold (no adds, deletes or renames), whose language is known by its extension (or,
for a file without one, by a shell shebang), with at most `--max-lines` lines before and
after, `--min-changed` to `--max-changed` added + deleted lines and `--max-hunks` changed
regions. `original` is the file in the commit's parent, `expected` the file in the commit,
`update` the lazy snippet: each changed region of `expected` with `--context` lines of unchanged
context around it (the hunks of a `difflib` diff with that context), every run of omitted lines
replaced by one `... existing code ...` comment line in the language's comment syntax, indented
as the least indented line it stands for; no marker at an end of the file the snippet reaches.
From all the candidates, `--limit` are drawn (at most `--per-language` of one language,
`--aux-per-language` of YAML, JSON, TOML or Markdown) with a `random.Random(seed/repo)`, so the
same mirror and options give the same tasks. Each task gets `split`: `heldout` for about a third
of the ids (by a seeded hash of the id), `dev` for the rest.

Standard library and the `git` command only.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import random
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

MARKER = "... existing code ..."

LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".ts": "typescript",
    ".go": "go",
    ".rb": "ruby",
    ".rake": "ruby",
    ".gemspec": "ruby",
    ".php": "php",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".cs": "csharp",
    ".swift": "swift",
    ".scala": "scala",
    ".sc": "scala",
    ".lua": "lua",
    ".sh": "bash",
    ".bash": "bash",
    ".java": "java",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".cc": "cpp",
    ".hpp": "cpp",
    ".yml": "yaml",
    ".yaml": "yaml",
    ".json": "json",
    ".toml": "toml",
    ".css": "css",
    ".html": "html",
    ".sql": "sql",
    ".md": "markdown",
}
_HASH = {"python", "ruby", "bash", "yaml", "toml"}
_DASH = {"lua", "sql"}
# JSON has no comments; chat models write `//` markers in it all the same.
_FRAMES: dict[str, tuple[str, str]] = {
    "css": ("/* ", " */"),
    "html": ("<!-- ", " -->"),
    "markdown": ("<!-- ", " -->"),
}


def marker_line(language: str, indent: str) -> str:
    if language in _FRAMES:
        head, tail = _FRAMES[language]
        return f"{indent}{head}{MARKER}{tail}"
    opener = "#" if language in _HASH else "--" if language in _DASH else "//"
    return f"{indent}{opener} {MARKER}"


def git(gitdir: str, *args: str) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", gitdir, *args], check=True, capture_output=True
    ).stdout


def language_of(path: str, text: str, ext_lang: dict[str, str]) -> str | None:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix:
        return ext_lang.get(suffix, LANGUAGES.get(suffix))
    first = text.split("\n", 1)[0]
    return "bash" if first.startswith("#!") and ("bash" in first or first.endswith("/sh")) else None


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def build_update(
    original: list[str], expected: list[str], language: str, context: int
) -> tuple[str, int, int]:
    """The lazy snippet, its number of hunks and changed lines (added + deleted)."""
    matcher = difflib.SequenceMatcher(None, original, expected, autojunk=False)
    groups = list(matcher.get_grouped_opcodes(context))
    changed = sum(
        max(i2 - i1, 0) + max(j2 - j1, 0)
        for g in groups
        for tag, i1, i2, j1, j2 in g
        if tag != "equal"
    )
    out: list[str] = []
    shown_to = 0
    for group in groups:
        j_start, j_end = group[0][3], group[-1][4]
        if j_start > shown_to:
            omitted = [ln for ln in expected[shown_to:j_start] if ln.strip()]
            nxt = expected[j_start] if j_start < len(expected) else ""
            indent = min((_indent(ln) for ln in omitted), key=len) if omitted else _indent(nxt)
            out.append(marker_line(language, indent))
        out.extend(expected[j_start:j_end])
        shown_to = j_end
    if shown_to < len(expected):
        omitted = [ln for ln in expected[shown_to:] if ln.strip()]
        indent = min((_indent(ln) for ln in omitted), key=len) if omitted else ""
        out.append(marker_line(language, indent))
    return "".join(ln + "\n" for ln in out), len(groups), changed


def split_of(task_id: str, seed: int = 0) -> str:
    digest = hashlib.sha256(f"{seed}/{task_id}".encode()).digest()
    return "heldout" if digest[0] % 3 == 0 else "dev"


def _commits(
    gitdir: str, first_parent: bool
) -> Iterator[tuple[str, str, list[tuple[int, int, str]]]]:
    walk = ["--first-parent"] if first_parent else []
    log = git(
        gitdir,
        "log",
        *walk,
        "--no-merges",
        "--no-renames",
        "--numstat",
        "--diff-filter=M",
        "--format=%x00%H %P%x01%s",
        "HEAD",
    ).decode("utf-8", "replace")
    for block in log.split("\x00")[1:]:
        head, _, rest = block.partition("\x01")
        subject, _, stat = rest.partition("\n")
        shas = head.split()
        if len(shas) != 2:
            continue
        files = []
        for row in stat.strip().splitlines():
            added, deleted, path = row.split("\t", 2)
            if added != "-" and deleted != "-":
                files.append((int(added), int(deleted), path))
        yield shas[0], subject.strip(), files


def _text(gitdir: str, rev: str, path: str) -> str | None:
    try:
        data = git(gitdir, "show", f"{rev}:{path}")
    except subprocess.CalledProcessError:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\r" in text or "\x00" in text else text


def candidates(
    gitdir: str, repo: str, opts: argparse.Namespace, ext_lang: dict[str, str]
) -> Iterator[dict[str, Any]]:
    for sha, subject, files in _commits(gitdir, opts.first_parent):
        if not files or len(files) > opts.max_files:
            continue
        for added, deleted, path in files:
            if not opts.min_changed <= added + deleted <= opts.max_changed:
                continue
            if PurePosixPath(path).suffix.lower() not in LANGUAGES | ext_lang and "." in path:
                continue
            original = _text(gitdir, f"{sha}^", path)
            expected = _text(gitdir, sha, path) if original is not None else None
            if original is None or expected is None or original == expected:
                continue
            language = language_of(path, original, ext_lang)
            if language is None or (opts.only and language not in opts.only):
                continue
            olines, elines = original.splitlines(), expected.splitlines()
            if not opts.min_lines <= len(olines) <= opts.max_lines or len(elines) > opts.max_lines:
                continue
            if not (original.endswith("\n") and expected.endswith("\n")):
                continue
            if [ln.strip() for ln in olines if ln.strip()] == [
                ln.strip() for ln in elines if ln.strip()
            ]:
                continue  # a whitespace-only edit says nothing about placement
            update, hunks, changed = build_update(olines, elines, language, opts.context)
            if hunks > opts.max_hunks:
                continue
            yield {
                "repo": repo,
                "commit": sha,
                "path": path,
                "language": language,
                "instruction": subject,
                "original": original,
                "update": update,
                "expected": expected,
                "stats": {"original_lines": len(olines), "changed_lines": changed, "hunks": hunks},
            }
            break  # one file per commit: commits differ more than files of one commit


_AUX = frozenset("yaml json toml markdown".split())


def draw(
    found: list[dict[str, Any]],
    limit: int,
    per_language: int,
    aux_per_language: int,
    rng: random.Random,
) -> list[dict[str, Any]]:
    rng.shuffle(found)
    taken: dict[str, int] = defaultdict(int)
    out = []
    for task in found:
        if len(out) >= limit:
            break
        cap = aux_per_language if task["language"] in _AUX else per_language
        if taken[task["language"]] < cap:
            taken[task["language"]] += 1
            out.append(task)
    return sorted(out, key=lambda t: (t["language"], t["path"], t["commit"]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("gitdir")
    p.add_argument("--repo", required=True, help="GitHub owner/name, recorded in each task")
    p.add_argument("--max-lines", type=int, default=300)
    p.add_argument("--min-lines", type=int, default=12)
    p.add_argument("--min-changed", type=int, default=3)
    p.add_argument("--max-changed", type=int, default=40)
    p.add_argument("--max-hunks", type=int, default=3)
    p.add_argument("--max-files", type=int, default=6, help="skip commits touching more files")
    p.add_argument("--limit", type=int, default=12)
    p.add_argument("--per-language", type=int, default=8)
    p.add_argument(
        "--aux-per-language",
        type=int,
        default=1,
        help="the cap for configuration and prose files (YAML, JSON, TOML, Markdown)",
    )
    p.add_argument("--context", type=int, default=3)
    p.add_argument("--ext-lang", action="append", default=[], metavar=".EXT=LANG")
    p.add_argument("--only", nargs="*", default=[], metavar="LANG")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--first-parent",
        action="store_true",
        help="walk HEAD's first parents only (for a mirror that lacks branch objects)",
    )
    args = p.parse_args(argv)
    ext_lang = {}
    for item in args.ext_lang:
        ext, _, lang = item.partition("=")
        if not ext.startswith(".") or not lang:
            print(f"--ext-lang {item!r}: write it as .EXT=LANG, e.g. .h=cpp", file=sys.stderr)
            return 2
        ext_lang[ext.lower()] = lang
    try:
        git(args.gitdir, "rev-parse", "HEAD")
    except (subprocess.CalledProcessError, FileNotFoundError):
        print(
            f"{args.gitdir}: not a git directory with a HEAD; pass a clone or a bare repo",
            file=sys.stderr,
        )
        return 2
    found = list(candidates(args.gitdir, args.repo, args, ext_lang))
    chosen = draw(
        found,
        args.limit,
        args.per_language,
        args.aux_per_language,
        random.Random(f"{args.seed}/{args.repo}"),
    )
    short = args.repo.split("/")[-1].lower()
    per_commit: dict[str, int] = defaultdict(int)
    for task in chosen:
        n = per_commit[task["commit"]]
        per_commit[task["commit"]] += 1
        task_id = f"{short}-{task['commit'][:7]}-{n}"
        record = {"id": task_id, **task, "split": split_of(task_id, args.seed)}
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"{args.repo}: {len(found)} candidates, {len(chosen)} drawn", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

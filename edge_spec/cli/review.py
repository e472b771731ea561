"""What `edge-spec run` says about an apply: verdicts, a reviewable diff, lazy and suspect answers."""

from __future__ import annotations

import difflib
import sys
from typing import Any

import click

from edge_spec.apply.plan import ApplyResult

_COLORS = {"+": "green", "-": "red", "@": "cyan"}


def diff_text(original: str, merged: str, name: str) -> str:
    """The change as a unified diff against the original (as `git diff` would show it)."""
    a = original.replace("\r\n", "\n").splitlines(keepends=True)
    b = merged.replace("\r\n", "\n").splitlines(keepends=True)
    lines = difflib.unified_diff(a, b, f"a/{name}", f"b/{name}")
    return "".join(
        ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in lines
    )


def print_diff(text: str) -> None:
    """The diff on stdout, coloured on a terminal."""
    color = sys.stdout.isatty()
    for line in text.splitlines(keepends=True):
        fg = _COLORS.get(line[:1]) if color and not line.startswith(("+++", "---")) else None
        click.echo(click.style(line, fg=fg) if fg else line, nl=False)


def verdict_lines(res: ApplyResult) -> list[str]:
    """One line per hunk: where it went and how sure the merge is."""
    out = []
    for v in res.verdicts:
        a, b = v["snippet_span"]
        where = (
            "unplaced"
            if v["original_span"] is None
            else f"original lines {v['original_span'][0] + 1}-{v['original_span'][1]}"
        )
        out.append(
            f"hunk {v['index'] + 1} (snippet lines {a}-{b}) -> {where}: {v['status']}"
            f" ({v['reason']})"
        )
    return out


def engine_note(res: ApplyResult, asked: str) -> str:
    """Who wrote the file, and what `auto` does for this snippet."""
    sure = bool(res.verdicts) and all(v["status"] == "exact" for v in res.verdicts)
    n = len(res.verdicts)
    if res.engine == "merge":
        return f"engine merge: the structural merge placed all {n} hunk(s) exactly; no model ran"
    if res.engine == "region":
        where = ", ".join(f"lines {r['lines'][0]}-{r['lines'][1]}" for r in res.regions)
        return (
            f"engine region ({asked}): the model rewrote {where} around the hunk(s) the "
            "merge is not sure of; the structural merge wrote the rest"
        )
    placed = bool(res.verdicts) and all(v["original_span"] is not None for v in res.verdicts)
    auto = (
        "return the structural merge without a model"
        if sure
        else "let the model rewrite the unsure regions or the file"
        if placed
        else "let the model write the file (a hunk is unplaced)"
    )
    return f"engine model ({asked}); auto would {auto}"


def lazy_warning(res: ApplyResult, streaming: bool, policy: str) -> int:
    """Warn on stderr about code the model left out; the exit code (3 when it reached stdout)."""
    if not res.lazy_lines:
        return 0
    n, first = len(res.lazy_lines), res.lazy_lines[0]
    what = (
        f"the model left {n} '... existing code ...' marker(s) in its answer (first: line {first})"
    )
    if res.fallback == "naive":
        click.echo(
            f"warning: {what}; wrote the merge of the snippet instead "
            "(--on-lazy keep writes the answer as is)",
            err=True,
        )
        return 0
    if streaming and policy != "keep":
        click.echo(
            f"warning: {what}: the file printed above is incomplete; use --out FILE or "
            "--json to get the merge instead",
            err=True,
        )
        return 3
    click.echo(f"warning: {what}: the merged file is incomplete", err=True)
    return 0


def doubt_warnings(res: ApplyResult, wrote: bool) -> None:
    """Say on stderr what the file does that the snippet allows but does not say, wherever the
    file reaches the user: passed by the check, streamed, or written with `--on-suspect write`."""
    if res.suspect and not wrote:
        return
    for doubt in res.warnings:
        click.echo(f"warning: {doubt}", err=True)


def suspect_warning(res: ApplyResult, wrote: bool) -> int:
    """Report a model answer that failed the check; exit code 3 when there is one."""
    if not res.suspect:
        return 0
    first = res.suspect[0] + (f" (+{len(res.suspect) - 1} more)" if len(res.suspect) > 1 else "")
    tail = "" if wrote else "; nothing written (see it with --json or --diff)"
    click.echo(f"warning: the model's file looks wrong: {first}{tail}", err=True)
    return 3


def apply_fields(res: Any) -> dict[str, Any]:
    """The apply fields of `--json` (nothing for free generation)."""
    return res.to_dict() if isinstance(res, ApplyResult) else {}

"""Bench outputs: results.json, summary.md and PNG plots (matplotlib, imported lazily)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from edge_spec.bench.modes import baseline_of
from edge_spec.bench.outcome import outcome_table
from edge_spec.fsutil import atomic_path, write_text


def write_results(
    out: Path, records: list[dict[str, Any]], summary: dict[str, Any], meta: dict[str, Any]
) -> None:
    write_text(out / "results.json", json.dumps(records, indent=1, ensure_ascii=False) + "\n")
    write_text(out / "summary.md", summary_md(summary, meta, records))


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    if pct:
        return f"{100 * v:.0f}%"
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def summary_md(summary: dict[str, Any], meta: dict[str, Any], records: list[dict[str, Any]]) -> str:
    m = meta["machine"]
    lines = [
        "# edge-spec bench",
        "",
        f"- command: `{meta['command']}`",
        f"- tasks: `{meta['tasks']}` ({meta['n_tasks']} tasks), repeats: {meta['repeat']}, "
        f"modes interleaved per task",
        f"- target: `{meta['model']}`, drafter: `{meta['drafter']}`, threads: {meta['threads']}, "
        f"profile: {meta.get('profile', 'built-in defaults')}, "
        f"apply template: {meta.get('template', 'from the model')}",
        f"- machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items()),
        f"- date: {meta['date']}",
        "",
        "Speedup = median over tasks of (mode decode tok/s) / (plain decode tok/s) in the same "
        "repeat (hf-* modes: over hf-plain, the transformers peer's own baseline). Decode "
        "excludes prefill (reported separately): tokens per second of target work after the "
        "prompt, so the peers, whose prompt eval yields the first token, count the tokens after "
        "it. '= plain' counts outputs identical "
        "to plain; '+ n tie' counts those that differ at a proven numeric near-tie (top-2 gap "
        "at the first differing token <= the batch-vs-single logit noise there).",
        "",
        "| mode | ok/runs | decode tok/s | speedup | worst task | tok/forward | acceptance "
        "| prefill ms | = plain | = expected | = expected (ws) | = expected (tokens) | line sim. "
        "| merge alone |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, s in summary.items():
        lines.append(
            f"| {mode} | {s['n_ok']}/{s['runs']} | {_fmt(s['decode_tok_s'])} | "
            f"{_fmt(s['speedup'])}x | {_fmt(s['min_speedup'])}x | {_fmt(s['tokens_per_forward'])} | "
            f"{_fmt(s['acceptance'], True)} | {_fmt(s['prefill_ms'])} | "
            f"{s['match_plain']}/{s['n_ok']}{_ties(s)} | {s['match_expected']}/{s['n_ok']} | "
            f"{s['match_expected_ws']}/{s['n_ok']} | {s.get('match_expected_tokens', 0)}/{s['n_ok']} "
            f"| {_fmt(s['line_similarity'])} | {s.get('merge_answered', 0)}/{s['n_ok']} |"
        )
    lazy = {m: s["lazy"] for m, s in summary.items() if s.get("lazy")}
    if lazy:
        lines += [
            "",
            "Lazy answers (the output kept `... existing code ...` markers, so code was "
            "left out): "
            + ", ".join(f"{m} {n}/{summary[m]['n_ok']}" for m, n in lazy.items())
            + ".",
        ]
    misses = {m: s["misses"] for m, s in summary.items() if s.get("misses")}
    if misses:
        lines += [
            "",
            "Misses by class (lazy, unplaced hunk, change outside the edited region, "
            "incomplete, invalid output, other): "
            + "; ".join(
                f"{m} " + ", ".join(f"{c} {n}" for c, n in cl.items()) for m, cl in misses.items()
            )
            + ".",
        ]
    lines += outcome_md(task_set(meta["tasks"]), outcome_table(records), meta.get("engine"))
    kinds = {m: s["by_kind"] for m, s in summary.items() if s.get("by_kind")}
    for m, by in kinds.items():
        lines += [
            "",
            f"Accuracy per snippet kind ({m}): "
            + ", ".join(f"{k} {e}/{n}" for k, (e, n) in sorted(by.items()))
            + ".",
        ]
    errors = [r for r in records if r.get("error")]
    if errors:
        lines += ["", "## Errors", ""]
        lines += [f"- {r['task_id']} {r['mode']}: {r['error']}" for r in errors[:20]]
    lines += ["", "## Per task (decode tok/s, first repeat)", ""]
    modes = list(summary)
    lines.append("| task | " + " | ".join(modes) + " |")
    lines.append("|---" * (len(modes) + 1) + "|")
    for tid in dict.fromkeys(r["task_id"] for r in records):
        row = {r["mode"]: r for r in records if r["task_id"] == tid and r["repeat"] == 0}
        cells = []
        for mode in modes:
            r = row.get(mode)
            if not r or r.get("error"):
                cells.append("err")
            else:
                mark = "" if r["match_plain"] in (True, None) else " (≠plain" + _tie(r) + ")"
                cells.append(f"{_fmt(r['decode_tok_s'])}{mark}")
        lines.append(f"| {tid} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def task_set(path: str) -> str:
    """A task set's name in reports: its file's stem."""
    return Path(path).stem


def outcome_md(name: str, table: dict[str, dict[str, Any]], engine: str | None) -> list[str]:
    """The outcome table of one task set (no lines when no mode of ours ran an apply)."""
    if not table:
        return []
    title = f"## What the user gets: {name}" + (f", --engine {engine}" if engine else "")
    lines = [
        "",
        title,
        "",
        "The file `edge-spec run --out` would leave: right, right but for trailing "
        "whitespace and blank lines, wrong with a warning, wrong without one, refused "
        "(the answer check held it back, or the engine said no; in brackets, refusals whose "
        "answer was right). End-to-end seconds per apply, merge included, p50 / p95 on the "
        "merge path, the model path (whole file or by region) and overall.",
        "",
        "| mode | runs | right | right (ws) | wrong, warned | wrong, silent | refused (right) "
        "| unjudged | merge s | model s | all s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, t in table.items():
        secs = " | ".join(_secs(t["e2e"][p]) for p in ("merge", "model", "all"))
        lines.append(
            f"| {mode} | {t['runs']} | {t['right']} | {t['right_ws']} | "
            f"{t['wrong_flagged']} | {t['wrong_silent']} | {t['refused']} "
            f"({t['refused_right']}) | {t['unjudged']} | {secs} |"
        )
    return lines


def _secs(s: dict[str, Any]) -> str:
    if not s["n"]:
        return "-"
    return f"{s['p50_s']:.3f} / {s['p95_s']:.3f} ({s['n']})"


def _ties(s: dict[str, Any]) -> str:
    return f" + {s['near_ties']} tie" if s.get("near_ties") else ""


def _tie(r: dict[str, Any]) -> str:
    """How a "≠ plain" result was explained: a proven near-tie, or not (a bug to look at)."""
    d = r.get("divergence")
    if not d or "near_tie" not in d:
        return ""
    verdict = "near-tie" if d["near_tie"] else "NOT a near-tie"
    return f", {verdict}: token {d['position']}, gap {d['top2_gap']} vs noise {d['noise']}"


def write_plots(out: Path, records: list[dict[str, Any]], focus_mode: str) -> list[Path]:
    """speedup.png, accepted_hist.png, k_trace.png; returns the paths written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    base = {
        (r["mode"], r["task_id"], r["repeat"]): r["decode_tok_s"]
        for r in records
        if r["mode"] in ("plain", "hf-plain") and r.get("decode_tok_s")
    }
    modes = [m for m in dict.fromkeys(r["mode"] for r in records) if m not in ("plain", "hf-plain")]
    tasks = list(dict.fromkeys(r["task_id"] for r in records))
    fig, ax = plt.subplots(figsize=(max(8, len(tasks) * 0.6), 4.5))
    width = 0.8 / max(1, len(modes))
    for j, mode in enumerate(modes):
        ys = []
        for t in tasks:
            rs = [
                r["decode_tok_s"] / base[(baseline_of(mode), t, r["repeat"])]
                for r in records
                if r["mode"] == mode
                and r["task_id"] == t
                and r.get("decode_tok_s")
                and (baseline_of(mode), t, r["repeat"]) in base
            ]
            ys.append(sorted(rs)[len(rs) // 2] if rs else 0.0)
        ax.bar([i + j * width for i in range(len(tasks))], ys, width, label=mode)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(
        [i + 0.4 - width / 2 for i in range(len(tasks))], tasks, rotation=60, ha="right", fontsize=7
    )
    ax.set_ylabel("decode speedup vs plain (hf-*: vs hf-plain)")
    if modes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    written.append(_save(fig, out / "speedup.png"))
    focus = [r for r in records if r["mode"] == focus_mode and r.get("accepted_hist")]
    if focus:
        hist: dict[int, int] = {}
        for r in focus:
            for k, v in r["accepted_hist"].items():
                hist[int(k)] = hist.get(int(k), 0) + v
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.bar(list(hist), list(hist.values()))
        ax.set_xlabel(f"accepted draft tokens per verify step ({focus_mode})")
        ax.set_ylabel("steps")
        fig.tight_layout()
        written.append(_save(fig, out / "accepted_hist.png"))
        longest = max(focus, key=lambda r: len(r.get("k_trace") or []))
        fig, ax = plt.subplots(figsize=(8, 3.5))
        ax.step(range(len(longest["k_trace"])), longest["k_trace"], where="post")
        ax.set_xlabel("verify step")
        ax.set_ylabel("draft length k")
        ax.set_title(f"{longest['task_id']} ({focus_mode})", fontsize=9)
        fig.tight_layout()
        written.append(_save(fig, out / "k_trace.png"))
    plt.close("all")
    return written


def _save(fig: Any, path: Path) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    return path

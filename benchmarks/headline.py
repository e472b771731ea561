"""The README's numbers table, regenerated from the kept results in benchmarks/results/.

    python benchmarks/headline.py            # print the table (Markdown)
    python benchmarks/headline.py --check    # exit 1 if README.md's table differs from it
    python benchmarks/headline.py --write    # replace README.md's table with it

Each row reads one results folder: the bench's `summary.md` (its first table: one row per
mode) or `model_accuracy.py`'s output. The table sits in README.md between the two marker
comments below, so the numbers a reader sees are exactly what the recorded runs say.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
README = HERE.parent / "README.md"
START, END = "<!-- headline:start -->", "<!-- headline:end -->"
HEADER = (
    "| what | machine | edge-spec | compared with | output = plain | results |\n"
    "|---|---|---|---|---|---|"
)


def first_table(path: Path) -> list[dict[str, str]]:
    """The first Markdown table of a file, one dict per body row, keyed by the header cells."""
    rows: list[list[str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            break
    if len(rows) < 3:
        raise SystemExit(f"error: {path} has no table with a body")
    return [dict(zip(rows[0], r, strict=False)) for r in rows[2:]]


def modes(folder: str, name: str = "summary.md") -> dict[str, dict[str, str]]:
    return {r["mode"]: r for r in first_table(RESULTS / folder / name)}


def speed(r: dict[str, str]) -> str:
    """'3.99x (worst 2.63x)': the median over tasks and the worst task of a summary row."""
    return f"{r['speedup']} (worst {r['worst task']})"


def link(folder: str) -> str:
    return f"[{folder}](benchmarks/results/{folder}/)"


def apply_speed(folder: str, machine: str, note: str) -> Callable[[], str]:
    def row() -> str:
        m = modes(folder)
        a = m["spec-adaptive"]
        fixed = "; ".join(
            f"{k.removeprefix('spec-')} {speed(m[k])}" for k in ("spec-fixed-64", "spec-fixed-128")
        )
        return (
            f"| code apply, 20 tasks, decode speedup over plain{note} | {machine} | "
            f"adaptive {speed(a)} | {fixed} | {a['= plain']} | {link(folder)} |"
        )

    return row


def vs_llama_server() -> str:
    folder = "apply-vs-llama-server-intel-xeon-2core"
    m = modes(folder)
    a = m["spec-adaptive"]
    peers = "; ".join(
        f"llama-server {k.removeprefix('llama-server-')} {speed(m[k])}"
        for k in ("llama-server-ngram-simple", "llama-server-ngram-mod")
    )
    return (
        f"| code apply, 20 tasks, beside llama.cpp's server (each over its own plain) | "
        f"Intel Xeon, 2 cores | adaptive {speed(a)} | {peers} | {a['= plain']} | "
        f"{link(folder)} |"
    )


def freeform() -> str:
    folder = "freeform-speed-intel-xeon-2core"
    a = modes(folder)["spec-adaptive"]
    return (
        f"| free prompts (no reference), decode speedup over plain | Intel Xeon, 2 cores | "
        f"adaptive {speed(a)} | plain 1.00x | {a['= plain']} | {link(folder)} |"
    )


def accuracy() -> str:
    folder = "apply-accuracy-guard-amd-epyc-2core"
    text = (RESULTS / folder / "model_accuracy.txt").read_text(encoding="utf-8")
    n = text.split(" of ", 1)[0]
    row = first_table_text(text)
    base = modes("apply-accuracy-templates-amd-epyc-2core", "summary-instruct.md")
    b = next(iter(base.values()))
    return (
        f"| code apply accuracy, the 1.5B target writing all {n} files | AMD EPYC, 2 cores | "
        f"`order` guard: {row['exact']}/{n} exact, {row['token-equal']}/{n} token-equal, "
        f"{row['lazy']} lazy | no guard: {b['= expected']} exact | - | "
        f"{link(folder)} |"
    )


def first_table_text(text: str) -> dict[str, str]:
    rows = [
        [c.strip() for c in ln.strip().strip("|").split("|")]
        for ln in text.splitlines()
        if ln.startswith("|")
    ]
    return dict(zip(rows[0], rows[2], strict=False))


ROWS: tuple[Callable[[], str], ...] = (
    apply_speed("apply-speed-intel-xeon-2core", "Intel Xeon, 2 cores", " (3 repeats, calibrated)"),
    vs_llama_server,
    apply_speed("apply-speed-amd-epyc-2core", "AMD EPYC, 2 cores", " (built-in cost table)"),
    freeform,
    accuracy,
)


def table() -> str:
    return "\n".join([HEADER, *(row() for row in ROWS)])


def readme_table(text: str) -> str:
    if START not in text or END not in text:
        raise SystemExit(f"error: {README} lacks the {START} ... {END} markers")
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with README.md's table")
    ap.add_argument("--write", action="store_true", help="write it into README.md")
    args = ap.parse_args(argv)
    want = table()
    if not (args.check or args.write):
        print(want)
        return 0
    text = README.read_text(encoding="utf-8")
    have = readme_table(text)
    if args.check:
        if have != want:
            print(
                "error: README.md's numbers table differs from benchmarks/results; run "
                "python benchmarks/headline.py --write",
                file=sys.stderr,
            )
            return 1
        return 0
    head, rest = text.split(START, 1)
    README.write_text(f"{head}{START}\n{want}\n{END}{rest.split(END, 1)[1]}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

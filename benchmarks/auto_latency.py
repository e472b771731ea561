"""How fast `auto` answers where the structural merge is sure: no model is loaded or run.

    python benchmarks/auto_latency.py [TASKS.jsonl] [--cli N]

For every task whose merge is `exact` it times `Engine.apply(engine="auto")` (one Engine, as a
server holds it) and checks the answer against the expected file. With `--cli N` it also times
N tasks through `edge-spec run --engine auto --out FILE`, each beside `edge-spec --version` (the
CLI's own start-up), alternating the two. Run it alone: these are wall-clock times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from edge_spec.apply.merge import structural_merge
from edge_spec.bench.modes import read_text
from edge_spec.engine import Engine

DEV = Path(__file__).resolve().parent / "data" / "code_apply_dev.jsonl.gz"


def _timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tasks", nargs="?", type=Path, default=DEV)
    ap.add_argument("--cli", type=int, default=0, help="time this many tasks through the CLI")
    args = ap.parse_args()
    tasks = [json.loads(x) for x in read_text(args.tasks).splitlines() if x.strip()]
    sure = [
        t
        for t in tasks
        if structural_merge(
            t["original"], t["update"], t.get("language") or "", t.get("path")
        ).exact
    ]
    engine, ms, right = Engine(), [], 0
    for t in sure:
        start = time.perf_counter()
        got = engine.apply(
            t["original"],
            t["update"],
            lang=t.get("language") or "",
            path=t.get("path"),
            engine="auto",
        )
        ms.append((time.perf_counter() - start) * 1000)
        right += got.text == t["expected"]
    print(
        f"Engine.apply(engine='auto') on {len(sure)} of {len(tasks)} tasks the merge is sure "
        f"of: median {statistics.median(ms):.1f} ms, max {max(ms):.1f} ms; "
        f"{right}/{len(sure)} equal the expected file"
    )
    if args.cli:
        exe = str(Path(sys.executable).with_name("edge-spec"))
        run_s, version_s = [], []
        with tempfile.TemporaryDirectory() as tmp:
            for t in sure[: args.cli]:
                suffix = Path(t.get("path") or "x.txt").suffix  # (the language, as an IDE gives it)
                orig, upd = Path(tmp, "original" + suffix), Path(tmp, "update" + suffix)
                orig.write_text(t["original"])
                upd.write_text(t["update"])
                version_s.append(_timed([exe, "--version"]))
                run_s.append(
                    _timed(
                        [
                            exe,
                            "run",
                            "--original",
                            str(orig),
                            "--update",
                            str(upd),
                            "--engine",
                            "auto",
                            "--out",
                            str(Path(tmp, "out")),
                        ]
                    )
                )
        print(
            f"CLI on {len(run_s)} tasks: `edge-spec run --engine auto` median "
            f"{statistics.median(run_s):.3f} s, `edge-spec --version` median "
            f"{statistics.median(version_s):.3f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Verify cost by forward size, including sizes next to multiples of 16 (llama.cpp, CPU).

    python benchmarks/verify_sizes.py [--sizes 1,2,...] [--repeat 3] [--threads 2] [--model M]

`edge-spec calibrate` measures powers of two; this shows what lies between them: one eval of n
tokens with logits on every row plus their argmax, after a 512-token code prompt, rolled back;
sizes interleaved (forward, then backward) over the repeats; median ms and ms per row.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from edge_spec.config.settings import DEMO_TARGET, RuntimeSettings
from edge_spec.runtimes import open_runtime
from edge_spec.store.models import resolve

SIZES = "1,2,3,4,5,8,9,15,16,17,31,32,33,63,64,65,124,125,126,127,128,129"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=SIZES)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default=DEMO_TARGET)
    a = ap.parse_args(argv)
    sizes = [int(x) for x in a.sizes.split(",")]
    rt = open_runtime("llamacpp", resolve(a.model), RuntimeSettings(n_ctx=4096, threads=a.threads))
    code = (Path(__file__).resolve().parents[1] / "edge_spec" / "core" / "loop.py").read_text()
    toks = rt.tokenize(code * 4, add_bos=True)
    rt.eval(toks[:512], rows=None)
    extra, base = toks[512 : 512 + max(sizes)], rt.n_tokens
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(a.repeat):
        for n in sizes if r % 2 == 0 else sizes[::-1]:
            t0 = time.perf_counter()
            rt.eval(extra[:n], rows=range(n)).argmax(axis=-1)
            times[n].append((time.perf_counter() - t0) * 1000)
            rt.truncate(base)
    print(f"{'n':>4} {'median ms':>10} {'ms/row':>7}  runs")
    for n in sizes:
        med = statistics.median(times[n])
        print(f"{n:4d} {med:10.1f} {med / n:7.1f}  " + " ".join(f"{t:.0f}" for t in times[n]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The speculative loop's own cost: wall time minus time inside runtime calls, per output token.

A fake target at the demo target's vocabulary (151,936, float32) returns logits rows from a
precomputed buffer (one random row per verify position, a view as llama.cpp's zero-copy rows
are), with the argmax of row j set to the next token of a fixed output, so the loop's numpy
argmax over full rows costs what it costs with a real model. The reference drafter copies a
reference text equal to that output (`--edit-every N` plants a substitution every N tokens, so
misses, re-synchronisation and the text fallback run too). Each fixed k (GenConfig(fixed_k=k))
and the adaptive controller run `--repeats` times; the medians are printed with a breakdown:

  setup       drafter.begin (indexing the prompt and references; once per request)
  draft       drafter.propose + drafter.observe
  argmax      the host-side greedy verify (argmax row by row of 151,936 floats, to the first miss;
              a long unmasked walk in row blocks over `--argmax-threads`, as llama.cpp's runtime)
  controller  policy select/observe, less the drafter's share
  text        TextStream push/flush (detokenization, stop strings)
  other       the rest: the loop body, Stats, list bookkeeping

Usage: python benchmarks/loop_overhead.py [--tokens 2048] [--ks 8,32,128] [--json]
       [--edit-every 64] [--argmax-threads N] [--profile 128]   (cProfile of one run at that
       k; 0: adaptive)
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import statistics
import string
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import edge_spec.core.loop as loop_mod
from edge_spec.config.settings import ControllerSettings
from edge_spec.core.controller import Controller
from edge_spec.core.loop import GenConfig, generate
from edge_spec.core.textstream import TextStream
from edge_spec.core.types import Draft, Drafter, Reference
from edge_spec.drafters.reference import ReferenceDrafter
from edge_spec.runtimes.base import ArgmaxPool, host_greedy

VOCAB = 151_936  # the demo target's (Qwen2.5) output layer
EOS = VOCAB - 1
_ALPHA = string.ascii_letters + string.digits + "_-"  # 64**3 > VOCAB: 3 letters name a token


def _word(t: int) -> str:
    """Token t's text: a space and 3 letters, about as long as a code token (~4 characters)."""
    return " " + _ALPHA[t // 4096] + _ALPHA[t // 64 % 64] + _ALPHA[t % 64]


class PoolRuntime:
    """A fake target whose greedy output is `output`, at the full vocabulary width.

    Row j of a verify is a precomputed random row with one entry raised to make the next token
    the argmax; only the raised entries change between calls, so the fake costs almost nothing
    and `busy_ms` (time inside eval/truncate) is what a real model's time would replace.
    """

    name = "pool-fake"
    path = None

    def __init__(
        self,
        prompt: Sequence[int],
        output: Sequence[int],
        rows: int,
        seed: int = 0,
        argmax_threads: int = 1,
    ) -> None:
        rng = np.random.default_rng(seed)
        self.n_vocab, self.n_ctx, self.n_batch = VOCAB, 1 << 20, 1 << 20
        self._buf = rng.random((rows, VOCAB), dtype=np.float32)
        self._hot = np.zeros(rows, dtype=np.int64)
        self._saved = self._buf[:, 0].copy()
        self._n_prompt = len(prompt)
        self._out = list(output)
        self._tokens: list[int] = []
        self._pieces = [_word(t).encode() for t in range(VOCAB - 1)] + [b""]
        self.busy_ms = 0.0
        self.buckets: Buckets | None = None  # set by an instrumented run
        self.argmax = ArgmaxPool(argmax_threads)  # as LlamaCppRuntime's, from its threads

    @property
    def n_tokens(self) -> int:
        return len(self._tokens)

    @property
    def tokens(self) -> list[int]:
        return self._tokens

    def _next(self, pos: int) -> int:
        """The target's greedy token at absolute position `pos` (valid along its own output)."""
        i = pos - self._n_prompt
        return self._out[i] if 0 <= i < len(self._out) else EOS

    def eval(self, tokens: Sequence[int], rows: Sequence[int] | None = None) -> np.ndarray:
        t0 = time.perf_counter()
        base = len(self._tokens)
        self._tokens.extend(tokens)
        want = [len(tokens) - 1] if rows is None else list(rows)
        for j, r in enumerate(want):
            nxt = self._next(base + r + 1)
            self._buf[j, self._hot[j]] = self._saved[j]
            self._saved[j] = self._buf[j, nxt]
            self._buf[j, nxt] = 2.0  # rows are uniform in [0, 1): this is the unique max
            self._hot[j] = nxt
        out = self._buf[: len(want)]
        self.busy_ms += (time.perf_counter() - t0) * 1e3
        return out

    def greedy(self, tokens: Sequence[int], banned: Any = None) -> list[int]:
        """Host-side greedy verify, as the llama.cpp backend does it: the rows come from the
        runtime (timed as runtime), the argmax over them is loop work (timed as "argmax")."""
        rows = self.eval(tokens, rows=range(len(tokens)))
        t0 = time.perf_counter()
        ids = host_greedy(rows, tokens[1:], banned, self.argmax)
        if self.buckets is not None:
            self.buckets.ms["argmax"] += (time.perf_counter() - t0) * 1e3
        return ids

    def truncate(self, n: int) -> None:
        t0 = time.perf_counter()
        del self._tokens[n:]
        self.busy_ms += (time.perf_counter() - t0) * 1e3

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = True) -> list[int]:
        words = text.split(" ")
        first = 0 if text.startswith(" ") else 1  # a text cut mid-token drops the fragment
        return [
            _ALPHA.index(w[0]) * 4096 + _ALPHA.index(w[1]) * 64 + _ALPHA.index(w[2])
            for w in words[first:]
            if len(w) == 3
        ]

    def token_bytes(self, token: int) -> bytes:
        return self._pieces[token]

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self._pieces[t] for t in tokens).decode()

    def is_eog(self, token: int) -> bool:
        return token == EOS


class Buckets:
    """Accumulated ms per part of the loop."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {
            k: 0.0 for k in ("setup", "draft", "argmax", "select", "observe", "text")
        }

    @contextlib.contextmanager
    def timing(self, key: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.ms[key] += (time.perf_counter() - t0) * 1e3


class TimedDrafter:
    """A drafter that times its inner drafter's calls."""

    def __init__(self, inner: Drafter, b: Buckets) -> None:
        self.inner, self.b, self.name = inner, b, inner.name

    def begin(
        self, prompt: Sequence[int], references: Sequence[Reference], rng: np.random.Generator
    ) -> None:
        with self.b.timing("setup"):
            self.inner.begin(prompt, references, rng)

    def propose(self, context: Sequence[int], max_len: int) -> Draft:
        with self.b.timing("draft"):
            return self.inner.propose(context, max_len)

    def observe(self, draft: Draft, accepted: int) -> None:
        with self.b.timing("draft"):
            self.inner.observe(draft, accepted)


class TimedController(Controller):
    """The controller with its select/observe timed (select includes the drafter's propose)."""

    def __init__(self, config: ControllerSettings, b: Buckets) -> None:
        super().__init__(config)
        self.b = b

    def select(
        self, drafters: Sequence[Drafter], context: Sequence[int], limit: int
    ) -> tuple[Draft, int]:
        with self.b.timing("select"):
            return super().select(drafters, context, limit)

    def observe(self, draft: Draft, k: int, accepted: int, verify_ms: float) -> None:
        with self.b.timing("observe"):
            super().observe(draft, k, accepted, verify_ms)


@contextlib.contextmanager
def timed_loop(b: Buckets) -> Iterator[None]:
    """Time the loop's TextStream by swapping the name the loop looks up (the argmax is timed
    by PoolRuntime.greedy). Measurement only: the original is restored on exit.
    """

    class TimedStream(TextStream):
        def push(self, token: int) -> tuple[str, bool]:
            # Called once per token: inline timing, a context manager would cost ~1 us itself.
            t0 = time.perf_counter()
            res = super().push(token)
            b.ms["text"] += (time.perf_counter() - t0) * 1e3
            return res

        def flush(self) -> str:
            with b.timing("text"):
                return super().flush()

    loop_mod.TextStream = TimedStream  # type: ignore[misc]
    try:
        yield
    finally:
        loop_mod.TextStream = TextStream  # type: ignore[misc]


def make_task(n_tokens: int, edit_every: int, seed: int) -> tuple[list[int], list[int], str]:
    """(prompt, target output, reference text): an apply-like prompt holding the reference."""
    rng = np.random.default_rng(seed)
    ref = [int(t) for t in rng.integers(0, VOCAB - 1, n_tokens)]
    out = list(ref)
    if edit_every:
        for i in range(edit_every, n_tokens, edit_every):
            out[i] = int(rng.integers(0, VOCAB - 1))
    head = [int(t) for t in rng.integers(0, VOCAB - 1, 64)]  # instruction-like preamble
    text = "".join(_word(t) for t in ref)
    return head + ref + head[:16], out, text


def run_bare(k: int | None, task: tuple[list[int], list[int], str], rt: PoolRuntime) -> float:
    """ms of loop overhead (wall - runtime) of one generation with no instrumentation."""
    prompt, out, text = task
    ctl = Controller(ControllerSettings(k_max=128))
    rt.truncate(0)
    rt.busy_ms = 0.0
    t0 = time.perf_counter()
    generate(
        rt,
        prompt,
        [ReferenceDrafter(rt)],
        ctl,
        GenConfig(max_tokens=len(out), fixed_k=k),
        references=[Reference(text)],
    )
    return (time.perf_counter() - t0) * 1e3 - rt.busy_ms


def run_once(
    k: int | None, task: tuple[list[int], list[int], str], rt: PoolRuntime
) -> dict[str, float]:
    """One generation; ms per bucket, runtime and wall, and the step/token counts."""
    prompt, out, text = task
    b = Buckets()
    ctl = TimedController(ControllerSettings(k_max=128), b)
    drafter = TimedDrafter(ReferenceDrafter(rt), b)
    rt.truncate(0)
    rt.busy_ms = 0.0
    rt.buckets = b
    with timed_loop(b):
        t0 = time.perf_counter()
        res = generate(
            rt,
            prompt,
            [drafter],
            ctl,
            GenConfig(max_tokens=len(out), fixed_k=k),
            references=[Reference(text)],
        )
        wall = (time.perf_counter() - t0) * 1e3
    rt.buckets = None
    assert res.tokens == out[: len(res.tokens)], "the loop changed the target's output"
    ms = dict(b.ms)
    # select includes propose (FixedK.select calls the drafter directly: not timed as select).
    draft_in_select = ms["draft"] if k is None else 0.0
    ms["controller"] = ms.pop("select") - draft_in_select + ms.pop("observe")
    ms["wall"], ms["runtime"] = wall, rt.busy_ms
    ms["overhead"] = wall - rt.busy_ms
    ms["other"] = ms["overhead"] - sum(
        ms[x] for x in ("setup", "draft", "argmax", "controller", "text")
    )
    ms["tokens"], ms["steps"] = float(len(res.tokens)), float(res.stats.target_forwards)
    return ms


PARTS = ("setup", "draft", "argmax", "controller", "text", "other")


def measure(ks: Sequence[int | None], args: argparse.Namespace) -> list[dict[str, Any]]:
    task = make_task(args.tokens, args.edit_every, args.seed)
    rt = PoolRuntime(
        task[0],
        task[1],
        rows=max(k or 128 for k in ks) + 1,
        seed=args.seed,
        argmax_threads=args.argmax_threads,
    )
    rows = []
    for k in ks:
        run_once(k, task, rt)  # warm-up: page in the buffer, fill caches
        runs = [run_once(k, task, rt) for _ in range(args.repeats)]
        med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        bare = statistics.median(run_bare(k, task, rt) for _ in range(args.repeats))
        tokens = med["tokens"]
        row: dict[str, Any] = {
            "mode": "adaptive" if k is None else f"fixed-{k}",
            "tokens": int(tokens),
            "steps": int(med["steps"]),
            "wall_ms": round(med["wall"], 2),
            "runtime_ms": round(med["runtime"], 2),
            "overhead_us_per_token": round(bare * 1e3 / tokens, 2),
            "instrumented_us_per_token": round(med["overhead"] * 1e3 / tokens, 2),
            "overhead_us_per_step": round(bare * 1e3 / med["steps"], 1),
        }
        for part in PARTS:
            row[f"{part}_us_per_token"] = round(med[part] * 1e3 / tokens, 2)
        rows.append(row)
    return rows


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"loop overhead, {args.tokens}-token copy of a reference"
        f"{f', an edit every {args.edit_every} tokens' if args.edit_every else ''}; "
        f"median of {args.repeats}; vocabulary {VOCAB}; argmax threads {args.argmax_threads}; "
        "microseconds per output token"
    )
    print("total: uninstrumented run; the parts: an instrumented run (they add up to 'timed')")
    head = ["mode", "tok/step", "total", "us/step", "timed", *PARTS]
    print("".join(f"{h:>11}" for h in head))
    for r in rows:
        vals = [
            r["mode"],
            f"{r['tokens'] / r['steps']:.1f}",
            f"{r['overhead_us_per_token']:.2f}",
            f"{r['overhead_us_per_step']:.0f}",
            f"{r['instrumented_us_per_token']:.2f}",
            *(f"{r[f'{p}_us_per_token']:.2f}" for p in PARTS),
        ]
        print("".join(f"{v:>11}" for v in vals))


def profile_one(k: int | None, args: argparse.Namespace) -> str:
    """cProfile of one generation at fixed k (None: adaptive): the top functions by own time."""
    task = make_task(args.tokens, args.edit_every, args.seed)
    rt = PoolRuntime(
        task[0], task[1], rows=(k or 128) + 1, seed=args.seed, argmax_threads=args.argmax_threads
    )
    run_once(k, task, rt)
    prof = cProfile.Profile()
    prof.enable()
    run_once(k, task, rt)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(18)
    return buf.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=2048, help="output tokens per generation")
    p.add_argument("--ks", default="8,32,128", help="fixed draft lengths")
    p.add_argument("--no-adaptive", action="store_true", help="skip the adaptive controller row")
    p.add_argument("--edit-every", type=int, default=0, help="plant a substitution every N")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--argmax-threads",
        type=int,
        default=os.cpu_count() or 1,
        help="threads of the host argmax, as llama.cpp's `threads` (default: all)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--profile",
        type=int,
        default=-1,
        metavar="K",
        help="cProfile one run at fixed K (0: the adaptive controller)",
    )
    p.add_argument("--out", default="", help="also write the JSON here")
    args = p.parse_args(argv)
    if args.profile >= 0:
        print(profile_one(args.profile or None, args))
        return 0
    ks: list[int | None] = [int(x) for x in args.ks.split(",") if x]
    if not args.no_adaptive:
        ks.append(None)
    rows = measure(ks, args)
    doc = {
        "tokens": args.tokens,
        "edit_every": args.edit_every,
        "repeats": args.repeats,
        "vocab": VOCAB,
        "argmax_threads": args.argmax_threads,
        "rows": rows,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print_table(rows, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

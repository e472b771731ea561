"""Measure this machine's verify-cost curve and drafter cost into a profile (`edge-spec calibrate`).

The target model is prefilled with a fixed code prompt, then for each n one `eval` of n tokens
with logits on all n rows (what a verify step asks for) plus the argmax over those rows is timed
and rolled back; the table holds the median of interleaved runs. The drafter's cost is the median
of single-token evals after the same prompt, as a ratio of the target's 1-token cost.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from edge_spec.config.local import machine_description
from edge_spec.config.profiles import CostsSection, Profile
from edge_spec.config.settings import (
    DEMO_DRAFTER,
    DEMO_TARGET,
    ControllerSettings,
    DrafterSettings,
    RuntimeSettings,
)
from edge_spec.runtimes import backend_name, open_runtime
from edge_spec.runtimes.base import Runtime
from edge_spec.store.models import resolve

SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
QUICK_SIZES = SIZES[:-1]
PROMPT_TOKENS = 512
DRAFTER_EVALS = 8

# llama.cpp `general.file_type` values -> quantization names (the common ones).
_FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    32: "BF16",
}

Report = Callable[[str, int, int], None]  # (description, steps done, steps in all)

# A fixed code prompt (about 700 tokens with the Qwen tokenizer): calibration is about costs,
# but the KV state should look like a real code-apply request.
CODE_PROMPT = '''\
"""A small job queue with retries, timeouts and a persistent journal."""

from __future__ import annotations

import json
import heapq
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

log = logging.getLogger(__name__)


@dataclass(order=True)
class Job:
    due: float
    job_id: str = field(compare=False)
    payload: dict = field(compare=False, default_factory=dict)
    attempts: int = field(compare=False, default=0)
    max_attempts: int = field(compare=False, default=5)

    def backoff(self) -> float:
        """Seconds to wait before the next attempt: exponential, capped at five minutes."""
        return min(300.0, 0.5 * (2 ** self.attempts))


class Journal:
    """Append-only JSON lines; replayed on start so no accepted job is lost."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def append(self, kind: str, job: Job) -> None:
        record = {"kind": kind, "id": job.job_id, "due": job.due,
                  "payload": job.payload, "attempts": job.attempts}
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\\n")

    def replay(self) -> Iterator[Job]:
        if not self.path.exists():
            return
        pending: dict[str, Job] = {}
        for line in self.path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if rec["kind"] == "done":
                pending.pop(rec["id"], None)
            else:
                pending[rec["id"]] = Job(rec["due"], rec["id"], rec["payload"], rec["attempts"])
        yield from pending.values()


class Queue:
    def __init__(self, journal: Journal, handler: Callable[[dict], None],
                 timeout: float = 30.0) -> None:
        self.journal = journal
        self.handler = handler
        self.timeout = timeout
        self._heap: list[Job] = list(journal.replay())
        heapq.heapify(self._heap)
        self._cv = threading.Condition()
        self._stopped = False

    def submit(self, job_id: str, payload: dict, delay: float = 0.0) -> Job:
        job = Job(time.monotonic() + delay, job_id, payload)
        self.journal.append("submit", job)
        with self._cv:
            heapq.heappush(self._heap, job)
            self._cv.notify()
        return job

    def _next(self) -> Job | None:
        with self._cv:
            while not self._stopped:
                if self._heap and self._heap[0].due <= time.monotonic():
                    return heapq.heappop(self._heap)
                wait = self._heap[0].due - time.monotonic() if self._heap else None
                self._cv.wait(timeout=wait)
            return None

    def run(self) -> None:
        while (job := self._next()) is not None:
            started = time.monotonic()
            try:
                self.handler(job.payload)
            except Exception:  # noqa: BLE001 - the handler's failure is the job's failure
                job.attempts += 1
                log.exception("job %s failed (attempt %d)", job.job_id, job.attempts)
                if job.attempts < job.max_attempts:
                    job.due = time.monotonic() + job.backoff()
                    self.journal.append("retry", job)
                    with self._cv:
                        heapq.heappush(self._heap, job)
                    continue
            elapsed = time.monotonic() - started
            if elapsed > self.timeout:
                log.warning("job %s took %.1fs, over the %.1fs timeout",
                            job.job_id, elapsed, self.timeout)
            self.journal.append("done", job)

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify_all()
'''


def quant_name(rt: Runtime) -> str:
    """The GGUF's quantization name from its metadata, or ''."""
    meta = rt.metadata
    try:
        return _FILE_TYPES.get(int(meta.get("general.file_type", -1)), "")
    except (TypeError, ValueError):
        return ""


def _prompt_tokens(rt: Runtime, n: int) -> list[int]:
    toks = rt.tokenize(CODE_PROMPT, add_bos=rt.add_bos)
    body = rt.tokenize(CODE_PROMPT)
    while len(toks) < n:
        toks += body
    return toks[:n]


def _ms() -> float:
    return time.perf_counter() * 1e3


def measure_target(
    rt,
    sizes: Sequence[int],
    repeats: int = 3,  # noqa: ANN001
    prompt_tokens: int = PROMPT_TOKENS,
    tick: Callable[[str], None] = lambda _d: None,
) -> tuple[dict[int, float], float]:
    """({n: median ms of a verify-shaped eval of n tokens}, prefill ms per token) on `rt`."""
    toks = _prompt_tokens(rt, prompt_tokens + max(sizes))
    prompt, draft = toks[:prompt_tokens], toks[prompt_tokens:]
    rt.truncate(0)
    tick("warm-up")
    rt.eval(prompt[:32])
    rt.truncate(0)
    t0 = _ms()
    rt.eval(prompt)
    prefill = (_ms() - t0) / len(prompt)
    tick(f"prefill {len(prompt)} tokens")
    for n in (1, min(16, max(sizes))):  # warm the batch shapes once
        rt.eval(draft[:n], rows=range(n))
        rt.truncate(len(prompt))
    times: dict[int, list[float]] = {n: [] for n in sizes}
    # Interleave the sizes so drift or a neighbour's load spreads over all of them.
    for rep in range(repeats):
        for n in sizes:
            t0 = _ms()
            logits = rt.eval(draft[:n], rows=range(n))
            np.argmax(logits, axis=1)  # a verify step reads every row
            times[n].append(_ms() - t0)
            rt.truncate(len(prompt))
            tick(f"verify n={n} ({rep + 1}/{repeats})")
    return {n: statistics.median(v) for n, v in times.items()}, prefill


def measure_drafter(
    rt,
    evals: int = DRAFTER_EVALS,  # noqa: ANN001
    prompt_tokens: int = PROMPT_TOKENS,
    tick: Callable[[str], None] = lambda _d: None,
) -> float:
    """Median ms of one single-token eval (how a model drafter drafts) after the prompt."""
    toks = _prompt_tokens(rt, prompt_tokens + evals + 2)
    prompt, draft = toks[:prompt_tokens], toks[prompt_tokens:]
    rt.truncate(0)
    rt.eval(prompt)
    rt.eval(draft[:1])
    rt.eval(draft[1:2])  # warm-up
    tick("drafter prefill")
    times = []
    for i in range(evals):
        t0 = _ms()
        logits = rt.eval(draft[2 + i : 3 + i])
        int(np.argmax(logits[-1]))
        times.append(_ms() - t0)
        tick(f"drafter token {i + 1}/{evals}")
    rt.truncate(0)
    return statistics.median(times)


def calibrate(
    model: str | os.PathLike[str] | None = None,
    drafter: str | os.PathLike[str] | None = None,
    *,
    threads: int = 0,
    n_gpu_layers: int = 0,
    quick: bool = False,
    repeats: int = 3,
    prompt_tokens: int = PROMPT_TOKENS,
    name: str = "local",
    report: Report | None = None,
    runtime: str = "llamacpp",
) -> Profile:
    """Measure the target (and drafter) and return a `source = "measured"` profile.

    `model` defaults to the demo target and, when it does, `drafter` to the demo drafter;
    `drafter=""` skips the drafter (its cost ratio then keeps the built-in default). Models
    missing from the store are pulled without a progress bar: resolve them first for one.
    """
    kind = backend_name(runtime)
    if drafter is None and model is None:
        drafter = DEMO_DRAFTER
    model = model if model is not None else DEMO_TARGET
    sizes = QUICK_SIZES if quick else SIZES
    n_threads = threads or max(1, os.cpu_count() or 1)
    total = 2 + len(sizes) * repeats + (1 + 1 + DRAFTER_EVALS if drafter else 0)
    done = 0

    def tick(desc: str) -> None:
        nonlocal done
        done += 1
        if report:
            report(desc, min(done, total), total)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    started = time.monotonic()
    n_ctx = 1 << (prompt_tokens + max(sizes) + 16 - 1).bit_length()
    opts = RuntimeSettings(
        backend=kind, n_ctx=n_ctx, n_batch=512, threads=n_threads, n_gpu_layers=n_gpu_layers
    )

    def open_model(m: str | os.PathLike[str]):  # noqa: ANN202 - a Runtime
        local = Path(m).expanduser()  # ort/torch take model folders; catalogue names resolve
        path = local if kind != "llamacpp" and local.is_dir() else resolve(m, progress=False)
        return open_runtime(kind, path, opts)

    if report:
        report("loading target", done, total)
    target = open_model(model)
    table, prefill = measure_target(target, sizes, repeats, prompt_tokens, tick)
    target_name = target.name
    del target

    ratio = ControllerSettings().draft_cost_ratio["model"]
    d_note = f"no drafter measured: drafter_ratio is the built-in {ratio}"
    d_quant = ""
    if drafter:
        if report:
            report("loading drafter", done, total)
        drt = open_model(drafter)
        tick("drafter loaded")
        d_ms = measure_drafter(drt, DRAFTER_EVALS, prompt_tokens, tick)
        d_quant = quant_name(drt)
        ratio = d_ms / table[1]
        d_note = (
            f"drafter {drt.name}: median of {DRAFTER_EVALS} single-token evals after the "
            f"same prompt, {d_ms:.1f} ms = {ratio:.3f} of the target's 1-token verify"
        )
        del drt

    extrapolated = ""
    if 128 not in table:
        t32, t64 = table[32], table[64]
        table[128] = max(t64 + 2 * (t64 - t32), t64)  # noise can make the slope negative
        extrapolated = " n=128 was not measured (--quick): extrapolated linearly from n=32 and 64."
    table = {n: round(ms, 2) for n, ms in sorted(table.items())}
    elapsed = time.monotonic() - started
    method = (
        f"edge-spec calibrate{' --quick' if quick else ''}: target {target_name} after a "
        f"{prompt_tokens}-token code prompt; per n one eval of n tokens with logits on all "
        f"n rows plus their argmax, rolled back; median of {repeats} interleaved runs; "
        f"{n_threads} threads, runtime {kind}; prefill: one {prompt_tokens}-token eval after warm-up. "
        f"{d_note}.{extrapolated} 1-minute load average at start {load:.2f}; "
        f"took {elapsed:.0f} s."
    )
    costs = CostsSection(
        verify_ms=table,
        drafter_ratio=round(ratio, 4),
        prefill_ms_per_token=round(prefill, 3),
        source="measured",
        machine=machine_description(n_gpu_layers),
        date=datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        method=method,
        target=str(model),
    )
    return Profile(
        name=name,
        description=f"measured by edge-spec calibrate on {costs.machine}",
        runtime=RuntimeSettings(backend=kind, threads=n_threads, n_gpu_layers=n_gpu_layers),
        drafter=DrafterSettings(
            kind="hybrid" if drafter else "reference", model=str(drafter or ""), quant=d_quant
        ),
        controller=ControllerSettings(),
        costs=costs,
    )

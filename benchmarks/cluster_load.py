"""Load test for `edge-spec serve --cluster` one run, side by side.

Workload: SmolLM2, `--clients` concurrent clients, each of the first `--tasks` dev-small tasks
sent `--repeats` times (64 apply requests by default, ``engine: model``), `max_tokens` 128, in
a shuffled order (fixed seed). Configurations (`--configs`, repeatable for A/B/A/B runs): the
single-process `edge-spec serve` (1 thread), Ray Serve with 1 replica, and 2 replicas with
prefix-affinity and with random routing (1 thread each). Reports requests/s, p50/p95 latency,
prompt tokens served from the KV cache, and the engines' summed busy time over wall time.

    .venv/bin/python benchmarks/cluster_load.py --out benchmarks/results/cluster-load-amd-epyc-2core/results.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import ray
from ray import serve

from edge_spec.bench.modes import read_text
from edge_spec.config.settings import ClusterSettings, ServerSettings
from edge_spec.server.cluster import REPLICA_BACKLOG, build_app
from edge_spec.store.models import resolve

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "benchmarks" / "data" / "code_apply_dev_small.jsonl"
MODEL = "smollm2-135m-instruct-q4_1"
# Every dev-small prompt fits (the largest is ~2,500 tokens), so no request fails on length.
N_CTX = "4096"
INSTRUCTIONS = (
    "",
    "Apply the edit.",
    "Merge the snippet into the file.",
    "Update the code.",
    "Apply this change.",
    "Integrate the edit.",
    "Make this change.",
    "Edit the file.",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def workload(
    n_tasks: int, repeats: int, vary: str, seed: int = 0, max_tokens: int = 128
) -> list[dict]:
    tasks = [json.loads(x) for x in read_text(TASKS).splitlines() if x.strip()][:n_tasks]
    reqs = []
    for t in tasks:
        for i in range(repeats):
            body = {
                "original": t["original"],
                "update": t["update"],
                "max_tokens": max_tokens,
                "engine": "model",
            }  # the structural merge or a region would skip most of it
            if vary == "instruction":  # the prompt has it after the file's prefix
                body["instruction"] = INSTRUCTIONS[i % len(INSTRUCTIONS)]
            else:  # the same file re-sent with the snippet varied (after the file in the prompt)
                body["update"] = t["update"] + "\n" * i
            reqs.append(body)
    random.Random(seed).shuffle(reqs)
    return reqs


def wait_ok(base: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"{base}/health", timeout=5)
            if r.status_code == 200 and r.json().get("status") == "ok":
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{base} did not become healthy")


def drive(base: str, reqs: list[dict], clients: int) -> dict:
    def one(body: dict) -> tuple[float, int, dict]:
        t0 = time.perf_counter()
        r = httpx.post(f"{base}/v1/apply", json=body, timeout=600)
        return time.perf_counter() - t0, r.status_code, (r.json() if r.status_code == 200 else {})

    with httpx.Client() as c:  # warm-up: model pages, first-request costs
        c.post(f"{base}/v1/apply", json={**reqs[0], "max_tokens": 8}, timeout=600)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        out = list(pool.map(one, reqs))
    wall = time.perf_counter() - t0
    lat = sorted(x[0] for x in out)
    ok = [x[2] for x in out if x[1] == 200]
    prompt = sum(u["usage"]["prompt_tokens"] for u in ok)
    cached = sum(u["usage"]["prompt_tokens_details"]["cached_tokens"] for u in ok)
    # Engine time summed over requests: over wall, how busy the engines were (1 = one engine
    # never idle); on a shared machine a steadier overhead measure than latency alone.
    engine = (
        sum(u["usage"]["timings"]["prefill_ms"] + u["usage"]["timings"]["decode_ms"] for u in ok)
        / 1e3
    )
    return {
        "requests": len(out),
        "ok": len(ok),
        "wall_s": round(wall, 2),
        "engine_s": round(engine, 2),
        "engine_busy": round(engine / wall, 3),
        "req_s": round(len(out) / wall, 3),
        "p50_s": round(statistics.median(lat), 3),
        "p95_s": round(lat[int(0.95 * (len(lat) - 1))], 3),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "prefill_tokens": prompt - cached,
    }


@contextlib.contextmanager
def single_server(model: str, threads: int = 1) -> Iterator[str]:
    """The single-process `edge-spec serve` in a subprocess; yields its base URL."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "edge_spec",
        "serve",
        "--model",
        model,
        "--draft",
        "reference",
        "--n-ctx",
        N_CTX,
        "--threads",
        str(threads),
        "--port",
        str(port),
        "--max-queue",
        "128",
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ok(base)
        yield base
    finally:
        proc.terminate()
        proc.wait(30)


@contextlib.contextmanager
def ray_server(
    model: str,
    replicas: int,
    affinity: str = "prefix",
    backlog: int = REPLICA_BACKLOG,
    **cluster_kw: Any,
) -> Iterator[str]:
    """A local Ray instance (`replicas` CPUs) serving the cluster app; yields its base URL."""
    port = free_port()
    ray.init(
        num_cpus=replicas,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=100 * 1024 * 1024,
        _node_ip_address="127.0.0.1",
    )
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        kw = {
            "replicas": replicas,
            "threads": 1,
            "num_cpus": 1,
            "affinity": affinity,
            "max_queued_requests": 128,
            **cluster_kw,
        }
        cluster = ClusterSettings(**kw)
        opts = {"model": model, "draft": "reference", "n_ctx": int(N_CTX)}
        serve.run(
            build_app(opts, cluster, ServerSettings(), backlog),
            name=cluster.app_name,
            route_prefix="/",
        )
        base = f"http://127.0.0.1:{port}"
        wait_ok(base)
        yield base
    finally:
        serve.shutdown()
        ray.shutdown()


def run_config(name: str, model: str, reqs: list[dict], clients: int) -> dict:
    """`single`, or `rayN[-affinity]`: N replicas with that routing (prefix by default)."""
    if name == "single":
        server = single_server(model)
    else:
        n, _, aff = name.removeprefix("ray").partition("-")
        server = ray_server(model, int(n), aff or "prefix")
    with server as base:
        return drive(base, reqs, clients)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--vary", choices=("instruction", "snippet"), default="instruction")
    ap.add_argument("--configs", default="single,ray1,ray2-prefix,ray2-random")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    model = str(resolve(MODEL, progress=False))
    reqs = workload(a.tasks, a.repeats, a.vary, max_tokens=a.max_tokens)
    results = {
        "workload": {
            "tasks": a.tasks,
            "repeats": a.repeats,
            "clients": a.clients,
            "vary": a.vary,
            "max_tokens": a.max_tokens,
            "engine": "model",
            "cpus": os.cpu_count(),
        }
    }
    for i, name in enumerate(a.configs.split(",")):
        res = run_config(name, model, reqs, a.clients)
        # A config may repeat (A,B,A,B: interleaved runs on a shared machine).
        results[name if name not in results else f"{name}#{i}"] = res
        print(name, json.dumps(res), flush=True)
    if a.out:
        a.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()

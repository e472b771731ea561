"""Where the Ray path's time goes: per-hop overhead and the replica's busy fraction.

`hop`: `single` and `ray1` up side by side, one client, requests interleaved A/B (so load from
other work on a shared machine hits both alike): ``GET /v1/models`` (through the replica on the
Ray path, no engine work) and small applies. Overhead = client latency - engine time (the
response's prefill_ms + decode_ms), per config. `busy`: one config at a time, `--clients`
concurrent clients; the engine's busy fraction (sum of engine time / wall) and the CPU seconds
each process group used meanwhile.

    nice -n 5 .venv/bin/python benchmarks/cluster_probe.py --out benchmarks/results/cluster-load-amd-epyc-2core/probe.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import psutil
from cluster_load import MODEL, ray_server, single_server, workload

from edge_spec.store.models import resolve


def engine_ms(body: dict) -> float:
    t = body.get("usage", {}).get("timings", {})
    return float(t.get("prefill_ms", 0.0)) + float(t.get("decode_ms", 0.0))


def timed(c: httpx.Client, base: str, body: dict | None) -> tuple[float, float, float]:
    """(latency ms, engine ms, replica-side queue ms) of one request."""
    t0 = time.perf_counter()
    if body is None:
        r = c.get(f"{base}/v1/models", timeout=600)
    else:
        r = c.post(f"{base}/v1/apply", json=body, timeout=600)
    ms = (time.perf_counter() - t0) * 1e3
    r.raise_for_status()
    out = r.json()
    return ms, engine_ms(out), float(out.get("usage", {}).get("timings", {}).get("queue_ms", 0))


def summary(rows: list[tuple[float, float, float]]) -> dict[str, float]:
    med = statistics.median
    return {
        "n": len(rows),
        "latency_ms": round(med(r[0] for r in rows), 1),
        "engine_ms": round(med(r[1] for r in rows), 1),
        "overhead_ms": round(med(r[0] - r[1] for r in rows), 1),
        "overhead_min_ms": round(min(r[0] - r[1] for r in rows), 1),
    }


def hop(bases: dict[str, str], reqs: list[dict], rounds: int) -> dict[str, Any]:
    rows: dict[str, list] = {f"{n}/{k}": [] for n in bases for k in ("models", "apply")}
    with httpx.Client() as c:
        for base in bases.values():  # warm-up
            timed(c, base, None)
            timed(c, base, reqs[0])
        for i in range(rounds):
            order = list(bases) if i % 2 == 0 else list(reversed(bases))
            for name in order:
                rows[f"{name}/models"].append(timed(c, bases[name], None))
                rows[f"{name}/apply"].append(timed(c, bases[name], reqs[i % len(reqs)]))
    return {k: summary(v) for k, v in rows.items()}


def group(p: psutil.Process) -> str:
    try:
        cmd = " ".join(p.cmdline())
    except psutil.Error:
        return "?"
    for key in (
        ":EngineReplica",
        ":Ingress",
        "ProxyActor",
        "ServeController",
        "raylet",
        "gcs_server",
        "edge_spec serve",
        "probe.py",
        "dashboard",
        "log_monitor",
        "ray::",
    ):
        if key in cmd:
            return key
    return "other"


def cpu_snapshot() -> dict[int, tuple[str, float]]:
    out = {}
    for p in psutil.process_iter():
        try:
            t = p.cpu_times()
            out[p.pid] = (group(p), t.user + t.system + t.children_user + t.children_system)
        except psutil.Error:
            pass
    return out


def cpu_delta(a: dict, b: dict) -> dict[str, float]:
    by: Counter[str] = Counter()
    for pid, (g, t) in b.items():
        by[g] += t - a.get(pid, (g, 0.0))[1]
    return {g: round(s, 1) for g, s in by.most_common() if s >= 0.05}


def busy(base: str, reqs: list[dict], clients: int) -> dict[str, Any]:
    def one(body: dict) -> tuple[float, float, float]:
        with httpx.Client() as c:
            return timed(c, base, body)

    with httpx.Client() as c:
        timed(c, base, reqs[0])
    snap = cpu_snapshot()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        rows = list(pool.map(one, reqs))
    wall = time.perf_counter() - t0
    eng = sum(r[1] for r in rows) / 1e3
    return {
        "wall_s": round(wall, 2),
        "engine_s": round(eng, 2),
        "busy_fraction": round(eng / wall, 3),
        "idle_s": round(wall - eng, 2),
        "p50_s": round(statistics.median(r[0] for r in rows) / 1e3, 2),
        "cpu_s": cpu_delta(snap, cpu_snapshot()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--busy-requests", type=int, default=16)
    ap.add_argument("--busy-max-tokens", type=int, default=32)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--phases", default="hop,busy")
    ap.add_argument("--ray-configs", default="ray1")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    model = str(resolve(MODEL, progress=False))
    small = [
        {**r, "max_tokens": a.max_tokens}
        for r in workload(8, 1, "instruction")
        if len(r["original"]) < 4000
    ]
    result: dict[str, Any] = {"args": vars(a) | {"out": str(a.out)}}
    phases = a.phases.split(",")
    for ray_cfg in a.ray_configs.split(","):
        with ExitStack() as stack:
            bases = {
                "single": stack.enter_context(single_server(model)),
                ray_cfg: stack.enter_context(ray_server(model, 1, **cfg_kw(ray_cfg))),
            }
            if "hop" in phases:
                result[f"hop:{ray_cfg}"] = hop(bases, small, a.rounds)
                print(json.dumps(result[f"hop:{ray_cfg}"], indent=1), flush=True)
            if "busy" in phases:
                reqs = [
                    {**r, "max_tokens": a.busy_max_tokens}
                    for r in (small * a.busy_requests)[: a.busy_requests]
                ]
                for name, base in bases.items():
                    result[f"busy:{ray_cfg}:{name}"] = res = busy(base, reqs, a.clients)
                    print(name, json.dumps(res), flush=True)
    if a.out:
        a.out.write_text(json.dumps(result, indent=2) + "\n")


def cfg_kw(name: str) -> dict[str, Any]:
    """`ray1` (as shipped) or `ray1-backlogN` (each replica queues N itself; 0: Ray's router
    holds every waiting request)."""
    _, _, rest = name.partition("-")
    return {"backlog": int(rest.removeprefix("backlog"))} if rest else {}


if __name__ == "__main__":
    main()

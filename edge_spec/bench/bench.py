"""`edge-spec bench`: plain vs speculative vs peers, interleaved per task, on one machine.

Every ratio is measured side by side in the same run: for each repeat and task, each mode runs
once in turn (A B C A B C), so machine drift hits all modes alike.
"""

from __future__ import annotations

import os
import platform
import statistics as st
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from edge_spec.apply.check.verdict import merge_of
from edge_spec.apply.clean import lazy_lines
from edge_spec.apply.merge.markers import snippet_markers
from edge_spec.bench.metrics import (
    MISS_CLASSES,
    line_similarity,
    line_split,
    miss_class,
    token_equal,
    ws_equal,
)
from edge_spec.bench.modes import RESULT_FIELDS, Mode, apply_plan, baseline_of
from edge_spec.bench.neartie import divergence
from edge_spec.bench.outcome import user_outcome
from edge_spec.bench.peers import PldPeer
from edge_spec.bench.peers_hf import HfPeer, run_hf
from edge_spec.bench.peers_server import LlamaServerPeer
from edge_spec.core.chat import chat_tokens
from edge_spec.core.controller import Controller
from edge_spec.errors import UserError


@dataclass(frozen=True)
class RunOptions:
    """How our modes run each task."""

    max_tokens: int | None = None
    template: str | None = None
    apply_engine: str = "model"  # speed runs: the model writes every file
    guard: str | bool = "order"
    on_lazy: str = "keep"  # speed runs compare the model's answers as written


@dataclass
class Peers:
    """The peers a run uses, each built when a mode needs it."""

    pld: PldPeer | None = None
    hf: HfPeer | None = None
    server: LlamaServerPeer | None = None


def run_ours(engine: Any, task: dict[str, Any], mode: Mode, opts: RunOptions) -> dict[str, Any]:
    if "prompt" not in task:
        return _run_apply(engine, task, mode, opts)
    t0 = time.perf_counter()
    res = engine.generate(
        task["prompt"],
        max_tokens=opts.max_tokens or 256,
        draft=mode.draft,
        fixed_k=mode.fixed_k,
        use_pool=mode.pool,
    )
    d = _stats_record(res.text, res.stats)
    d["e2e_ms"] = _ms_since(t0)
    # Token ids for the near-tie check of a "≠ plain" result; dropped before results are saved.
    d["_ids"] = (engine.prompt_tokens(task["prompt"]), list(res.tokens), None)
    d["output_ids"] = [int(t) for t in res.tokens]
    return d


def _run_apply(engine: Any, task: dict[str, Any], mode: Mode, opts: RunOptions) -> dict[str, Any]:
    """One apply as a user asks for it: `e2e_ms` from request to answer, merge included."""
    _load_for(engine, task, mode, opts)
    t0 = time.perf_counter()
    try:
        res = engine.apply(
            task["original"],
            task["update"],
            task.get("instruction"),
            lang=task.get("language", ""),
            max_tokens=opts.max_tokens,
            draft=mode.draft,
            fixed_k=mode.fixed_k,
            template=opts.template,
            engine=opts.apply_engine,
            path=task.get("path"),
            guard=opts.guard,
            on_lazy=opts.on_lazy,
            use_pool=mode.pool,
        )
    except UserError as exc:  # what `edge-spec run` says in one line, writing nothing
        return {
            "error": f"UserError: {exc}",
            "refusal": str(exc),
            "e2e_ms": _ms_since(t0),
            "engine_used": "merge" if opts.apply_engine == "merge" else None,
        }
    e2e = _ms_since(t0)
    d = _stats_record(res.text, res.stats)
    d.update(res.to_dict())
    d["engine_used"], d["e2e_ms"] = res.engine, e2e
    # One prompt for the near-tie check; an apply by region has one per window, and the merge
    # none.
    prompt, tokens = res.extra.get("prompt"), res.extra.get("tokens") or []
    d["_ids"] = (prompt, list(tokens), res.extra.get("guard")) if prompt is not None else None
    d["output_ids"] = [int(t) for t in tokens]
    if tokens and res.engine == "model":  # one prompt, one answer: its steps map onto lines
        pieces = [engine.target.token_bytes(t) for t in tokens]
        emitted = [a + 1 for a in d["accepted_trace"]]
        d.update(line_split(pieces, emitted, task["original"]))
    return d


def _stats_record(text: str, stats: Any) -> dict[str, Any]:
    d = stats.to_dict(steps=True)
    d["text"] = text
    steps = d.pop("steps")
    # Per-step traces and the output ids: enough to replay the run offline with any draft-length
    # policy (greedy output does not depend on k); see edge_spec.bench.replay.
    d["k_trace"] = [s["k"] for s in steps]
    d["accepted_trace"] = [s["accepted"] for s in steps]
    d["verify_ms_trace"] = [round(s["verify_ms"], 3) for s in steps]
    d["source_trace"] = [s["source"] for s in steps]
    return d


def _load_for(engine: Any, task: dict[str, Any], mode: Mode, opts: RunOptions) -> None:
    """Load the models an apply will run before its clock starts, so `e2e_ms` is a request's
    time in a running session; an apply the merge answers alone loads nothing."""
    if engine.loaded or opts.apply_engine == "merge":
        return
    if (
        opts.apply_engine != "model"
        and merge_of(
            task["original"], task["update"], task.get("language", ""), task.get("path")
        ).exact
    ):
        return
    # Properties that load the models on first use.
    engine.target  # noqa: B018
    if mode.draft in ("hybrid", "model"):
        engine.drafter_rt  # noqa: B018


def _ms_since(t0: float) -> float:
    return round(1000 * (time.perf_counter() - t0), 3)


def run_task(
    engine: Any, peers: Peers, task: dict[str, Any], mode: Mode, opts: RunOptions
) -> dict[str, Any]:
    """One measurement; errors are recorded, never raised."""
    try:
        if mode.peer and mode.peer.startswith("hf-"):
            return run_hf(peers.hf, engine, task, mode, opts.max_tokens, opts.template)
        if mode.peer in ("pld", "llama-server"):
            return _run_llamacpp_peer(engine, peers, task, mode, opts)
        if mode.peer:
            raise UserError(f"mode {mode.name} is not available in this build")
        return run_ours(engine, task, mode, opts)
    except Exception as exc:  # noqa: BLE001 - a failing mode must not stop the benchmark
        return {"error": f"{type(exc).__name__}: {exc}"}


def _run_llamacpp_peer(
    engine: Any, peers: Peers, task: dict[str, Any], mode: Mode, opts: RunOptions
) -> dict[str, Any]:
    """llama-cpp-python's prompt lookup or llama.cpp's llama-server, from our exact prompt."""
    if mode.peer == "pld" and peers.pld is None:
        raise UserError("llamacpp-pld needs the llama.cpp target")
    if mode.peer == "llama-server" and peers.server is None:
        raise UserError("llama-server modes need --llama-server PATH or $LLAMA_SERVER")
    plan = None if "prompt" in task else apply_plan(engine, task, opts.template, opts.max_tokens)
    if plan is None:
        toks = chat_tokens(engine.target, [{"role": "user", "content": task["prompt"]}])
        budget, stop = opts.max_tokens or 256, ()
    else:
        toks, budget, stop = plan.tokens, plan.budget, plan.stop
    if mode.peer == "pld":
        d = peers.pld.run(toks, budget, stop, mode.param or 10)  # type: ignore[union-attr]
    else:
        d = peers.server.run(mode.name, toks, budget, stop)  # type: ignore[union-attr]
    if plan is not None:
        d["text"] = plan.clean(d["text"], d["finish_reason"] == "stop")
    return d


def bench(
    engine: Any,
    tasks: list[dict[str, Any]],
    modes: list[Mode],
    repeat: int,
    opts: RunOptions,
    peers: Peers | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every (repeat, task, mode) interleaved; return result records."""
    peers = peers or Peers()
    if peers.hf is None and any(m.peer and m.peer.startswith("hf-") for m in modes):
        peers.hf = HfPeer.for_engine(engine)  # loads its models on first use, once per run
    records: list[dict[str, Any]] = []
    # One controller per mode: what a mode learns carries over its own requests, as in a server,
    # and never into another mode's (a fixed-K run would otherwise teach the adaptive one).
    controllers = {m.name: Controller(engine.controller.cfg) for m in modes if not m.peer}
    # Pools likewise: a mode drafts only from its own earlier outputs, in the tasks' order
    # (plain's answer to this very task must not be in another mode's pool).
    pools: dict[str, dict[str, Any]] = {name: {} for name in controllers}
    own, own_pools = engine.controller, getattr(engine, "pools", None)
    for r in range(repeat):
        for task in tasks:
            plain_text = None
            plain_ids = None
            hf_text = None
            for mode in modes:
                if mode.name in controllers:
                    engine.controller = controllers[mode.name]
                    engine.pools = pools[mode.name]
                d = run_task(engine, peers, task, mode, opts)
                ids = d.pop("_ids", None)
                rec = {"task_id": task["id"], "mode": mode.name, "repeat": r, **d}
                text = d.get("text")
                if mode.name == "plain":
                    plain_text, plain_ids = text, ids
                rec["match_plain"] = (
                    None if text is None or plain_text is None else text == plain_text
                )
                if rec["match_plain"] is False and ids is not None and plain_ids is not None:
                    rec["divergence"] = _divergence(engine, plain_ids, ids)
                if mode.name == "hf-plain":
                    hf_text = text
                if mode.peer and mode.peer.startswith("hf-"):  # the peer's own losslessness
                    rec["match_hf_plain"] = (
                        None if text is None or hf_text is None else text == hf_text
                    )
                exp = task.get("expected")
                rec["match_expected"] = None if text is None or exp is None else text == exp
                rec["match_expected_ws"] = (
                    None if text is None or exp is None else ws_equal(text, exp)
                )
                rec["line_similarity"] = (
                    None if text is None or exp is None else round(line_similarity(text, exp), 4)
                )
                rec["match_expected_tokens"] = (
                    None
                    if text is None or exp is None
                    else token_equal(text, exp, task.get("language", ""), task.get("path", ""))
                )
                # Answers that left '... existing code ...' markers (or the snippet's own
                # markers, in any wording) in: code left out.
                rec["lazy"] = (
                    None
                    if text is None or "original" not in task
                    else len(
                        lazy_lines(
                            text,
                            task["original"],
                            snippet_markers(
                                task["original"], task.get("update", ""), task.get("language", "")
                            ),
                        )
                    )
                )
                rec["miss"] = miss_class(rec)
                if not mode.peer and "original" in task:
                    rec.update(user_outcome(rec, exp, bool(task.get("ambiguous"))))
                if "kind" in task:  # a messy variant: accuracy is reported per kind
                    rec["kind"] = task["kind"]
                rec.setdefault("error", None)
                for f in RESULT_FIELDS:
                    rec.setdefault(f, None)
                records.append(rec)
                if progress:
                    progress(f"{task['id']} {mode.name}")
    engine.controller, engine.pools = own, own_pools
    return records


def _divergence(
    engine: Any, plain: tuple[list[int], list[int], Any], ours: tuple[list[int], list[int], Any]
) -> dict[str, Any] | None:
    """The near-tie check of an output that differs from plain (same runtime, same prompt,
    the plain run's guard: part of the target)."""
    if plain[0] != ours[0]:
        return None
    try:
        d = divergence(engine.target, plain[0], plain[1], ours[1], guard=plain[2])
    except Exception as exc:  # noqa: BLE001 - a failed check must not stop the benchmark
        return {"error": f"{type(exc).__name__}: {exc}"}
    return d.to_dict() if d is not None else None


def machine() -> dict[str, Any]:
    """CPU model, cores and library versions for the summary."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for pkg in ("edge-spec", "llama-cpp-python", "numpy"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
    }


def summarize(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Medians per mode, with speedups as medians of per-task ratios to the mode's baseline
    (plain; hf-plain for the transformers peer)."""

    def med(xs: list[float]) -> float | None:
        xs = [x for x in xs if x is not None]
        return round(st.median(xs), 3) if xs else None

    base: dict[str, dict[tuple[str, int], float]] = {
        b: {
            (r["task_id"], r["repeat"]): r["decode_tok_s"]
            for r in records
            if r["mode"] == b and not r["error"] and r["decode_tok_s"]
        }
        for b in ("plain", "hf-plain", "llama-server")
    }
    out: dict[str, dict[str, Any]] = {}
    for mode in dict.fromkeys(r["mode"] for r in records):
        rs = [r for r in records if r["mode"] == mode]
        ok = [r for r in rs if not r["error"]]
        plain = base[baseline_of(mode)]
        ratios = [
            r["decode_tok_s"] / plain[(r["task_id"], r["repeat"])]
            for r in ok
            if (r["task_id"], r["repeat"]) in plain and r["decode_tok_s"]
        ]
        out[mode] = {
            "runs": len(rs),
            "errors": len(rs) - len(ok),
            "decode_tok_s": med([r["decode_tok_s"] for r in ok]),
            "speedup": med(ratios),
            "min_speedup": round(min(ratios), 3) if ratios else None,
            "prefill_ms": med([r["prefill_ms"] for r in ok]),
            "tokens_per_forward": med([r["tokens_per_forward"] for r in ok]),
            "acceptance": med([r["acceptance"] for r in ok]),
            "match_plain": sum(bool(r["match_plain"]) for r in ok),
            "near_ties": sum(bool((r.get("divergence") or {}).get("near_tie")) for r in ok),
            "match_expected": sum(bool(r["match_expected"]) for r in ok),
            "match_expected_ws": sum(bool(r.get("match_expected_ws")) for r in ok),
            "line_similarity": med([r.get("line_similarity") for r in ok]),
            "lazy": sum(bool(r.get("lazy")) for r in ok),
            "match_expected_tokens": sum(bool(r.get("match_expected_tokens")) for r in ok),
            "merge_answered": sum(r.get("engine") == "merge" for r in ok),
            "misses": {c: n for c in MISS_CLASSES if (n := sum(r.get("miss") == c for r in ok))},
            "n_ok": len(ok),
            "baseline": baseline_of(mode),
            "by_kind": _by_kind(ok),
        }
    return out


def _by_kind(records: list[dict[str, Any]]) -> dict[str, list[int]]:
    """{kind: [exact, tasks]} for messy-variant task files (empty for canonical tasks)."""
    out: dict[str, list[int]] = {}
    for r in records:
        if r.get("kind") and r.get("match_expected") is not None:
            acc = out.setdefault(str(r["kind"]), [0, 0])
            acc[0] += bool(r["match_expected"])
            acc[1] += 1
    return out

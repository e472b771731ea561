"""Greedy speculative output equals plain greedy output on real models (or is a proven near-tie)."""

from __future__ import annotations

import pytest
from conftest import load_tasks

from edge_spec.apply.plan import plan_apply
from edge_spec.bench.neartie import divergence
from edge_spec.engine import Engine, EngineConfig
from edge_spec.runtimes.base import RuntimeOptions
from edge_spec.runtimes.llamacpp import LlamaCppRuntime


def check_tasks(
    engine: Engine,
    tasks: list[dict],
    max_tokens: int,
    modes: tuple[tuple[str, int | None], ...],
    report: list[str],
) -> None:
    """Plain vs each speculative mode per task; a divergence must be a measured near-tie."""
    failures = []
    for t in tasks:
        plain = engine.apply(
            t["original"],
            t["update"],
            t["instruction"],
            draft="none",
            max_tokens=max_tokens,
            engine="model",
        )
        for mode, fixed_k in modes:
            spec = engine.apply(
                t["original"],
                t["update"],
                t["instruction"],
                draft=mode,
                max_tokens=max_tokens,
                fixed_k=fixed_k,
                engine="model",
            )
            s = spec.stats
            report.append(
                f"{t['id']:<24} {mode:<9} k={fixed_k or 'auto':<4} out {s.output_tokens:4d} "
                f"tok/fwd {s.output_tokens / max(1, s.target_forwards):5.2f} "
                f"acc {s.accepted}/{s.drafted} cached {s.cached_tokens}"
            )
            if spec.extra["tokens"] == plain.extra["tokens"]:
                continue
            # The target is the guarded one: the top-2 gap is taken over the tokens its apply
            # guard allows there (the spec token must be one), the noise near the divergence.
            plan = plan_apply(
                engine.target, t["original"], t["update"], t["instruction"], max_tokens=max_tokens
            )
            div = divergence(
                engine.target,
                plain.extra["prompt"],
                plain.extra["tokens"],
                spec.extra["tokens"],
                guard=plan.guard,
            )
            assert div is not None
            report.append(
                f"  divergence at {div.position}: top-2 gap {div.top2_gap:.4f} over the "
                f"guard's tokens, batch-vs-single noise {div.noise:.4f}, "
                f"near-tie {div.near_tie}"
            )
            if not div.near_tie:
                failures.append((t["id"], mode, div))
    assert not failures, failures


@pytest.mark.real
def test_smollm2_spec_equals_plain(smollm2_path, capsys) -> None:  # noqa: ANN001
    cfg = RuntimeOptions(n_ctx=4096, threads=2)
    # SmolLM2 drafting for itself: a real second runtime with the same vocabulary.
    engine = Engine(
        LlamaCppRuntime(smollm2_path, cfg),
        LlamaCppRuntime(smollm2_path, cfg),
        EngineConfig().override(kind="hybrid"),
    )
    report: list[str] = []
    try:
        check_tasks(
            engine,
            load_tasks(n=5),
            160,
            (("reference", None), ("hybrid", None), ("model", 4), ("reference", 8)),
            report,
        )
    finally:
        with capsys.disabled():
            print("\n" + "\n".join(report))


@pytest.mark.slow
def test_qwen_pair_spec_equals_plain(qwen_paths, capsys) -> None:  # noqa: ANN001
    target, drafter = qwen_paths
    engine = Engine(target, drafter, EngineConfig().override(n_ctx=4096, threads=2))
    report: list[str] = []
    try:
        check_tasks(engine, load_tasks(n=5), 96, (("hybrid", None),), report)
    finally:
        with capsys.disabled():
            print("\n" + "\n".join(report))

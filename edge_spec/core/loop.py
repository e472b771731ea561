"""The speculative generate loop: draft -> verify -> accept -> adapt. Every front end uses it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from edge_spec.config.settings import SamplingSettings
from edge_spec.core.controller import FixedK, Policy
from edge_spec.core.guard import Guard, RowMasks, guard_state
from edge_spec.core.stats import Stats, Step
from edge_spec.core.textstream import TextStream
from edge_spec.core.types import Drafter, Reference
from edge_spec.core.verify import verify_stochastic
from edge_spec.errors import UserError
from edge_spec.runtimes.base import RowBan, Runtime, mask_row
from edge_spec.runtimes.prefix import prefill


@dataclass(frozen=True)
class GenConfig:
    """One request's limits and sampling; `fixed_k` disables adaptation (for comparisons)."""

    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    fixed_k: int | None = None
    guard: Guard | None = None  # part of the target: plain and speculative both apply it


@dataclass
class GenResult:
    text: str
    tokens: list[int]
    stats: Stats


def _now() -> float:
    return time.perf_counter() * 1e3


def _prefill(
    target: Runtime,
    prompt: Sequence[int],
    stats: Stats,
    cancel: threading.Event | None = None,
    clock: Callable[[], float] = _now,
) -> bool:
    """Evaluate all but the last prompt token, reusing the KV prefix left by the last request
    in whole n_batch chunks only (`edge_spec.runtimes.prefix`).

    Returns False when cancelled; long prompts are evaluated in chunks so a cancel lands soon.
    """
    if not prompt:
        raise UserError("empty prompt: nothing to generate from")
    if len(prompt) >= target.n_ctx:
        raise UserError(
            f"prompt of {len(prompt)} tokens does not fit the context of "
            f"{target.n_ctx}; shorten the input or raise n_ctx"
        )
    t0 = clock()
    stats.prompt_tokens = len(prompt)
    keep = prefill(target, prompt[:-1], cancel)
    if keep is None:
        return False
    stats.cached_tokens = keep
    stats.prefill_ms = clock() - t0
    return True


def request_rngs(seed: int | None) -> tuple[np.random.Generator, np.random.Generator]:
    """(verifier, drafter) generators: independent streams spawned from one seed per request.

    Sharing one stream (or two generators seeded alike) would correlate the drafter's sample
    with the verifier's acceptance draw and bias the output away from the target's distribution.
    """
    verifier, drafter = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(verifier), np.random.default_rng(drafter)


def generate(
    target: Runtime,
    prompt: Sequence[int],
    drafters: Sequence[Drafter],
    ctl: Policy,
    cfg: GenConfig,
    references: Sequence[Reference] = (),
    on_delta: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    clock: Callable[[], float] = _now,
) -> GenResult:
    """Generate from `prompt` losslessly: the output is what the target alone would produce.

    `drafters` are asked in order each step; the controller picks the draft and its length.
    `clock` (ms) times the steps the controller learns from: a replay passes a virtual one.
    """
    stats = Stats(draft=draft_label(drafters))
    policy: Policy = ctl if cfg.fixed_k is None else FixedK(cfg.fixed_k, ctl)
    if not _prefill(target, prompt, stats, cancel, clock):
        stats.finish_reason = "cancelled"
        return GenResult(text="", tokens=[], stats=stats)
    t_start = clock()
    rng, drafter_rng = request_rngs(cfg.sampling.seed)
    policy.new_request()
    for drafter in drafters:
        drafter.begin(prompt, references, drafter_rng)
    ctx, out = list(prompt), list[int]()
    pending = ctx[-1]
    guard = cfg.guard
    gstate = guard_state(guard, target, prompt) if guard else None
    stream = TextStream(target.token_bytes, cfg.stop)
    emit = on_delta or (lambda _d: None)
    finish = ""
    while not finish:
        if cancel is not None and cancel.is_set():
            finish = "cancelled"
            break
        # Never draft past max_tokens or the context: the bonus token needs a slot too.
        limit = min(cfg.max_tokens - len(out), target.n_ctx - target.n_tokens) - 1
        if limit < 0:
            finish = "length"
            break
        draft, k = policy.select(drafters, ctx, limit)
        d = draft.tokens[:k]
        t0 = clock()
        banned = RowMasks(guard, gstate, d, target) if guard is not None else None
        if cfg.sampling.greedy:  # the runtime takes the argmax (on the device for GPUs)
            ids = target.greedy([pending, *d], banned)
            n_acc, nxt = len(ids) - 1, ids[-1]
        else:
            logits = target.eval([pending, *d], rows=range(k + 1))
            if banned is not None:
                logits = _masked(logits, banned)
            probs = draft.probs[:k] if draft.probs else None
            n_acc, nxt = verify_stochastic(logits, d, probs, cfg.sampling, rng)
        verify_ms = clock() - t0
        target.truncate(target.n_tokens - (k - n_acc))  # keep pending + accepted draft tokens
        new = [*d[:n_acc], nxt]
        if guard is not None and banned is not None:  # states after the accepted draft
            gstate = guard.advance(banned.state(n_acc), target.token_bytes(nxt))
        policy.observe(draft, k, n_acc, verify_ms)
        for drafter in drafters:
            drafter.observe(draft.head(k), n_acc)
        stats.add(
            Step(
                draft.source if k else "none",
                draft.feature,
                k,
                n_acc,
                len(new),
                verify_ms,
                draft.draft_ms,
            )
        )
        for tok in new:
            if target.is_eog(tok):
                finish = "eos"
                break
            out.append(tok)
            ctx.append(tok)
            delta, stopped = stream.push(tok)
            if delta:
                if not stats.ttft_ms:
                    stats.ttft_ms = clock() - t_start + stats.prefill_ms
                emit(delta)
            if stopped:
                finish = "stop"
            elif len(out) >= cfg.max_tokens:
                finish = "length"
            if finish:
                break
        pending = nxt
    tail = stream.flush()
    if tail:
        emit(tail)
    stats.finish_reason = finish
    stats.output_tokens = len(out)
    stats.decode_ms = clock() - t_start
    return GenResult(text=stream.text, tokens=out, stats=stats)


def _masked(logits: np.ndarray, banned: Sequence[RowBan]) -> np.ndarray:
    if not logits.flags.writeable:
        logits = logits.copy()
    for i, ban in enumerate(banned):
        mask_row(logits[i], ban)
    return logits


def draft_label(drafters: Sequence[Drafter]) -> str:
    """The `draft` field of the stats: none, a drafter's name, or hybrid for several. The
    pool of earlier outputs rides along with the reference drafter and names no mode."""
    named = [d.name for d in drafters if d.name != "pool"] or [d.name for d in drafters]
    if not named:
        return "none"
    return named[0] if len(named) == 1 else "hybrid"

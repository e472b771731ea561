"""The speculative loop on the fake runtime: exact equality with plain greedy, every drafter."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from edge_spec.config.settings import ControllerSettings
from edge_spec.core.controller import Controller
from edge_spec.core.loop import GenConfig, generate
from edge_spec.core.types import Draft
from edge_spec.drafters.model import ModelDrafter
from edge_spec.drafters.reference import ReferenceDrafter
from edge_spec.errors import UserError
from edge_spec.runtimes.fake import EOS, FakeRuntime, VirtualClock

SOURCE = (
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n"
    "class Calc:\n    def mul(self, a, b):\n        return a * b  # ünïcödé ✓ 漢字 🙂\n"
)


def target(**kw) -> FakeRuntime:
    return FakeRuntime(follow=SOURCE.replace("sub", "minus"), **kw)


def prompt(rt: FakeRuntime) -> list[int]:
    return rt.tokenize("Rewrite:\n" + SOURCE + "\nAnswer:\ndef add", add_bos=True)


def plain(max_tokens: int = 200, **kw) -> list[int]:
    rt = target(**kw)
    return generate(rt, prompt(rt), [], Controller(), GenConfig(max_tokens=max_tokens)).tokens


class Oracle:
    """Proposes exactly what plain greedy decoding produces (or always-wrong tokens)."""

    name = "oracle"

    def __init__(self, truth: Sequence[int], n_prompt: int, wrong: bool = False) -> None:
        self.truth, self.n_prompt, self.wrong = list(truth), n_prompt, wrong

    def begin(self, prompt, references, rng):  # noqa: ANN001
        pass

    def propose(self, context, limit):  # noqa: ANN001
        i = len(context) - self.n_prompt
        toks = self.truth[i : i + limit]
        if self.wrong:
            toks = [(t + 1) % 250 + 3 for t in toks]
        return Draft(tokens=toks, source="reference", feature="oracle")

    def observe(self, draft, accepted):  # noqa: ANN001
        pass


def flat_ctl(k_max: int = 64) -> Controller:
    return Controller(ControllerSettings(k_max=k_max, verify_ms={1: 10.0, 128: 11.0}))


@pytest.mark.parametrize("fixed_k", [1, 2, 4, 8, 32, None])
@pytest.mark.parametrize("kind", ["reference", "model", "hybrid"])
def test_speculative_equals_plain(kind: str, fixed_k: int | None) -> None:
    want = plain()
    rt = target()
    drafter_rt = FakeRuntime(follow=SOURCE, seed=7)
    ref = ReferenceDrafter(rt)
    model = ModelDrafter(drafter_rt, p_min=0.0)
    drafters = {"reference": [ref], "model": [model], "hybrid": [ref, model]}[kind]
    res = generate(
        rt,
        prompt(rt),
        drafters,
        flat_ctl(),
        GenConfig(max_tokens=200, fixed_k=fixed_k),
        references=[SOURCE],
    )
    assert res.tokens == want
    assert res.stats.target_forwards < len(want) or kind == "model"


def test_oracle_all_accepted_and_always_wrong() -> None:
    want = plain(max_tokens=120)
    rt = target()
    p = prompt(rt)
    for k in (1, 4, 8):
        rt = target()
        res = generate(rt, p, [Oracle(want, len(p))], flat_ctl(), GenConfig(120, fixed_k=k))
        assert res.tokens == want
        assert res.stats.drafted and res.stats.accepted == res.stats.drafted
        full = [s for s in res.stats.steps if s.k == k]
        assert all(s.emitted == k + 1 for s in full)
        rt = target()
        res = generate(
            rt, p, [Oracle(want, len(p), wrong=True)], flat_ctl(), GenConfig(120, fixed_k=k)
        )
        assert res.tokens == want and res.stats.accepted == 0


def test_adaptive_backs_off_when_drafts_fail() -> None:
    want = plain(max_tokens=150)
    clock = VirtualClock()  # the fake's latency, not the machine's load, prices the steps
    rt = target(latency_ms=(8.0, 4.0), clock=clock)
    p = prompt(rt)
    ctl = Controller(ControllerSettings(verify_ms={1: 12.0, 2: 16.0, 8: 40.0, 64: 264.0}))
    res = generate(rt, p, [Oracle(want, len(p), wrong=True)], ctl, GenConfig(150), clock=clock)
    assert res.tokens == want
    late = res.stats.steps[len(res.stats.steps) // 2 :]
    assert sum(s.k for s in late) <= 0.2 * len(late)


def test_eos_inside_draft_and_max_tokens() -> None:
    rt = FakeRuntime(follow=SOURCE, eos_after="a + b\n")
    p = rt.tokenize("x" + SOURCE + "\ndef add", add_bos=True)
    base = generate(rt, p, [], Controller(), GenConfig(300))
    assert base.stats.finish_reason == "eos"
    rt2 = FakeRuntime(follow=SOURCE, eos_after="a + b\n")
    spec = generate(rt2, p, [ReferenceDrafter(rt2)], flat_ctl(), GenConfig(300, fixed_k=32))
    assert spec.tokens == base.tokens and spec.stats.finish_reason == "eos"
    assert EOS not in spec.tokens
    for m in (1, 5, 17):
        rt3 = target()
        r = generate(
            rt3, prompt(rt3), [ReferenceDrafter(rt3)], flat_ctl(), GenConfig(m, fixed_k=32)
        )
        assert len(r.tokens) == m and r.stats.finish_reason == "length"
        assert r.tokens == plain(max_tokens=m)


def test_stop_string_inside_accepted_block_and_utf8_stream() -> None:
    rt = target()
    full = generate(rt, prompt(rt), [], Controller(), GenConfig(400)).text
    # Stop right after the multi-byte characters, before the fake's noise begins.
    n_bytes = len(full[: full.index("🙂") + 2].encode())
    want_text = full[: full.index("🙂") + 2]
    stop = "return a * b"
    rt = target()
    deltas: list[str] = []
    res = generate(
        rt,
        prompt(rt),
        [ReferenceDrafter(rt)],
        flat_ctl(),
        GenConfig(400, stop=(stop,), fixed_k=64),
        on_delta=deltas.append,
    )
    assert res.stats.finish_reason == "stop"
    assert res.text == want_text[: want_text.index(stop)]
    assert "".join(deltas) == res.text
    rt = target()
    deltas = []
    res = generate(
        rt,
        prompt(rt),
        [ReferenceDrafter(rt)],
        flat_ctl(),
        GenConfig(n_bytes),
        on_delta=deltas.append,
        references=[SOURCE],
    )
    assert "".join(deltas) == res.text == want_text
    assert res.stats.accepted > 0 and len(deltas) < len(res.tokens)
    assert all("\ufffd" not in d for d in deltas)


def test_cancel_and_prefix_reuse() -> None:
    rt = target(n_batch=64)  # shorter than the prompt, so a whole chunk of it can be reused
    ev = threading.Event()
    got: list[str] = []

    def on_delta(d: str) -> None:
        got.append(d)
        ev.set()

    res = generate(rt, prompt(rt), [], Controller(), GenConfig(300), on_delta=on_delta, cancel=ev)
    assert res.stats.finish_reason == "cancelled" and len(res.tokens) <= 2
    res2 = generate(rt, prompt(rt), [], Controller(), GenConfig(50))
    # the cancel came after the prompt was in: the same prompt again reuses all of it
    assert res2.stats.cached_tokens == len(prompt(rt)) - 1
    assert res2.tokens == plain(max_tokens=50)


def test_empty_reference_and_prompt_too_long() -> None:
    rt = target()
    res = generate(
        rt, prompt(rt), [ReferenceDrafter(rt)], flat_ctl(), GenConfig(60), references=[""]
    )
    assert res.tokens == plain(max_tokens=60)
    small = FakeRuntime(n_ctx=32)
    with pytest.raises(UserError, match="does not fit"):
        generate(small, small.tokenize("x" * 40), [], Controller(), GenConfig(5))


def test_context_limit_never_overflows() -> None:
    rt = FakeRuntime(follow=SOURCE, n_ctx=len(prompt(target())) + 20)
    res = generate(rt, prompt(rt), [ReferenceDrafter(rt)], flat_ctl(), GenConfig(500, fixed_k=32))
    assert res.stats.finish_reason == "length" and rt.n_tokens <= rt.n_ctx


def test_batched_equals_single_on_fake() -> None:
    rt = target()
    toks = prompt(rt)
    full = rt.eval(toks, rows=range(len(toks))).copy()
    rt.truncate(0)
    single = np.stack([rt.eval([t])[0].copy() for t in toks])
    assert np.array_equal(full, single)

"""A slow first model draft (the drafter's own prefill) must not lock the model drafter out."""

from __future__ import annotations

from edge_spec.config.settings import ControllerSettings
from edge_spec.core.controller import Controller
from edge_spec.core.loop import GenConfig, generate
from edge_spec.core.types import Draft
from edge_spec.drafters.model import ModelDrafter
from edge_spec.runtimes.fake import FakeRuntime

SOURCE = "".join(f"def f{i}(x):\n    return x * {i}\n\n" for i in range(12))


def ctl(**kw: object) -> Controller:
    # A GPU-like cost curve, where a cheap drafter pays.
    return Controller(
        ControllerSettings(
            verify_ms={1: 10.0, 8: 11.0, 64: 14.0, 128: 18.0},
            draft_cost_ratio={"reference": 0.001, "model": 0.1},
            **kw,
        )
    )


def test_prefill_time_is_not_a_per_token_cost() -> None:
    c = ctl()
    assert c.best_k("model", 64) > 0
    slow_first = Draft(
        tokens=[1] * 8, source="model", feature="model", draft_ms=2008.0, prefill_ms=2000.0
    )
    c.observe(slow_first, 8, 8, 11.0)
    assert c.draft_ratio("model") < 0.2
    assert c.best_k("model", 64) > 0


def test_one_slow_sample_is_smoothed_probed_and_forgotten() -> None:
    c = ctl(probe_every=5)
    slow = Draft(tokens=[1] * 8, source="model", feature="model", draft_ms=8000.0)
    c.observe(slow, 8, 0, 11.0)
    # Smoothed from the prior, not replaced by the sample.
    assert c.draft_ratio("model") < 0.1 + 0.3 * (1000.0 / 10.0) + 1e-9
    ks = [c.best_k("model", 64) for _ in range(5)]
    assert ks[-1] > 0, ks  # refused a few times, then probed again
    for _ in range(3):
        c.new_request()
    assert c.draft_ratio("model") < 0.2  # back near the prior after a few requests
    assert c.best_k("model", 64) > 0


def test_model_drafter_prefills_lazily_and_reports_it() -> None:
    target = FakeRuntime(follow=SOURCE)
    drafter_rt = FakeRuntime(follow=SOURCE, seed=5, latency_ms=(0.0, 0.2))
    prompt = target.tokenize("Copy:\n" + SOURCE + "\nAnswer:\n", add_bos=True)
    drafts: list[Draft] = []

    class Spy(ModelDrafter):
        def propose(self, context, max_len):  # noqa: ANN001, ANN201
            d = super().propose(context, max_len)
            drafts.append(d)
            return d

    c = ctl(probe_prefill_share=100.0)  # here the prefill always pays: this is about reporting
    res = generate(target, prompt, [Spy(drafter_rt, p_min=0.0)], c, GenConfig(max_tokens=60))
    assert res.stats.output_tokens == 60 and len(drafts) > 2
    # The first draft brought the drafter's cache up to the prompt (timed apart); later ones
    # only catch up on accepted tokens. No wall-clock bound: the split is what matters.
    assert drafts[0].prefill_ms > 0 and drafts[0].prefill_ms <= drafts[0].draft_ms
    assert all(d.prefill_ms == 0.0 for d in drafts[1:])
    assert drafter_rt.evaluated >= len(prompt)


def test_no_drafter_prefill_when_the_model_is_never_asked() -> None:
    target = FakeRuntime(follow=SOURCE)
    drafter_rt = FakeRuntime(follow=SOURCE, seed=5)
    prompt = target.tokenize("Q:\n", add_bos=True)
    expensive = Controller(ControllerSettings(draft_cost_ratio={"model": 50.0}, probe_every=10**6))
    generate(target, prompt, [ModelDrafter(drafter_rt)], expensive, GenConfig(max_tokens=20))
    assert drafter_rt.evaluated == 0


def test_a_prefill_that_cannot_pay_is_never_started() -> None:
    # A long context, little decoding left: the drafter's prefill would cost more than the
    # share of plain decoding it may take, so the model is not asked, not even as a probe.
    target = FakeRuntime(follow=SOURCE)
    drafter_rt = FakeRuntime(follow=SOURCE, seed=5)
    prompt = target.tokenize("Copy:\n" + SOURCE * 3 + "\nAnswer:\n", add_bos=True)
    c = ctl(probe_every=2)
    generate(target, prompt, [ModelDrafter(drafter_rt)], c, GenConfig(max_tokens=20))
    assert drafter_rt.evaluated == 0
    # Once warm in a request (its prefill paid), probes are cheap and allowed again.
    assert c.best_k("model", 64, context_len=10_000) == 0
    c._warm.add("model")
    assert any(c.best_k("model", 64, context_len=10_000) for _ in range(3))

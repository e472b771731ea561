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
    return Controller(ControllerSettings(verify_ms={1: 10.0, 8: 11.0, 64: 14.0, 128: 18.0},
                                         draft_cost_ratio={"reference": 0.001, "model": 0.1},
                                         **kw))


def test_prefill_time_is_not_a_per_token_cost() -> None:
    c = ctl()
    assert c.best_k("model", 64) > 0
    slow_first = Draft(tokens=[1] * 8, source="model", feature="model", draft_ms=2008.0,
                       prefill_ms=2000.0)
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

    c = ctl()
    res = generate(target, prompt, [Spy(drafter_rt, p_min=0.0)], c, GenConfig(max_tokens=60))
    assert res.stats.output_tokens == 60 and len(drafts) > 2
    assert drafts[0].prefill_ms > 0.2 * len(prompt) * 0.5  # the prompt went through here
    assert all(d.prefill_ms == 0.0 for d in drafts[1:])
    assert c.best_k("model", 64) > 0


def test_no_drafter_prefill_when_the_model_is_never_asked() -> None:
    target = FakeRuntime(follow=SOURCE)
    drafter_rt = FakeRuntime(follow=SOURCE, seed=5)
    prompt = target.tokenize("Q:\n", add_bos=True)
    expensive = Controller(ControllerSettings(draft_cost_ratio={"model": 50.0}, probe_every=10**6))
    generate(target, prompt, [ModelDrafter(drafter_rt)], expensive, GenConfig(max_tokens=20))
    assert drafter_rt.evaluated == 0

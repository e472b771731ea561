"""Apply by region: windows around unsure hunks, the merge's text elsewhere."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import BENCH as DATA

from edge_spec.apply.merge import structural_merge
from edge_spec.apply.plan import ApplyResult
from edge_spec.apply.region import RegionPlan, Window, plan_regions, run_regions
from edge_spec.bench.modes import read_text
from edge_spec.config.settings import ApplySettings, EngineConfig
from edge_spec.core.stats import Stats
from edge_spec.engine import Engine
from edge_spec.runtimes.fake import FakeRuntime

FNS = "".join(f"def f{i}(x):\n    y = x + {i}\n    return y\n\n\n" for i in range(12))
CLASSES = "".join(
    f"class {c}:\n    def run(self):\n        total = 0\n        total += 1\n"
    "        return total\n\n\n"
    for c in "AB"
)
ORIG = "import os\n\n\n" + FNS + CLASSES.rstrip("\n") + "\n"
# f1's edit is sure (a whole definition by name); the `run` edit fits class A and class B.
SNIP = (
    "# ... existing code ...\ndef f1(x):\n    y = x + 100\n    return y\n"
    "# ... existing code ...\n    def run(self):\n        total = 0\n        total += 2\n"
    "        return total\n"
)


def _plan(original: str = ORIG, snippet: str = SNIP, **kw: object) -> RegionPlan | None:
    merge = structural_merge(original, snippet, "python")
    return plan_regions(original, snippet, merge, ApplySettings(**kw))  # type: ignore[arg-type]


def _rebuilt(plan: RegionPlan) -> str:
    """The plan's file with each window written as the merge would (what the model drafts)."""
    res = run_regions(plan, lambda w, cb: _answer(w.merged), None, "")
    return res.text


def _answer(text: str) -> ApplyResult:
    return ApplyResult(
        text=text, raw=text, stats=Stats(finish_reason="stop", output_tokens=3), template="t"
    )


def test_one_window_around_the_unsure_hunk_the_sure_one_settled() -> None:
    plan = _plan(region_context=3)
    assert plan is not None and len(plan.windows) == 1
    win = plan.windows[0]
    assert win.hunks == (1,)
    lines = ORIG.split("\n")
    # Edges at statement starts, never on a blank line, never cutting `class A:` off its body.
    assert lines[win.start].strip() and lines[win.end - 1].strip()
    assert "class A:\n    def run(self):" in win.original
    assert win.snippet.startswith("# ... existing code ...\n    def run(self):")
    assert "total += 2" in win.merged and "def f1(" not in win.original
    settled = "".join("\n".join(s) for s in plan.segments if not isinstance(s, Window))
    assert "y = x + 100" in settled  # the sure hunk is the merge's, outside any window
    assert _rebuilt(plan) == structural_merge(ORIG, SNIP, "python").text


def test_no_regions_when_sure_unplaced_or_too_wide() -> None:
    sure = "# ... existing code ...\ndef f1(x):\n    y = x + 100\n    return y\n"
    assert _plan(snippet=sure) is None  # exact: the merge answers alone
    lost = "# ... existing code ...\nvalue = compute()\n# ... existing code ...\n"
    assert _plan(snippet=lost) is None  # unplaced: no window can be cut
    assert _plan(region_context=3, region_max_share=0.05) is None  # whole file instead
    merge = structural_merge(ORIG, SNIP, "python")
    assert plan_regions(ORIG, SNIP, merge, ApplySettings(region_max_share=0.0), force=True)


def test_a_sure_hunk_a_window_cuts_goes_into_it() -> None:
    snip = (
        "# ... existing code ...\ndef f11(x):\n    y = x + 110\n    return y\n"
        "# ... existing code ...\n    def run(self):\n        total = 0\n        total += 2\n"
        "        return total\n"
    )
    plan = _plan(snippet=snip, region_context=8)
    assert plan is not None
    (win,) = plan.windows
    assert win.hunks == (0, 1) and "y = x + 110" in win.merged
    assert win.snippet.count("existing code") == 2
    assert _rebuilt(plan) == structural_merge(ORIG, snip, "python").text


def test_crlf_no_final_newline_and_streaming() -> None:
    orig = ORIG.replace("\n", "\r\n").rstrip("\r\n")
    plan = _plan(original=orig, region_context=3)
    assert plan is not None and plan.eol == "\r\n" and not plan.final
    got: list[str] = []
    res = run_regions(
        plan,
        lambda w, cb: (cb(w.merged[:10]) if cb else None, _answer(w.merged))[1],
        got.append,
        orig,
    )
    assert res.text == structural_merge(orig, SNIP, "python").text
    assert "".join(got) == res.text and res.engine == "region"
    assert res.regions and res.regions[0]["hunks"] == [2] and res.stats.output_tokens == 3


def test_dev_tasks_rebuild_to_the_merge() -> None:
    """On every dev task the merge is unsure of, settled text + windows == the merge's text."""
    seen = 0
    for name in ("code_apply_dev.jsonl.gz", "code_apply_dev_small_messy.jsonl.gz"):
        for line in read_text(DATA / name).splitlines():
            t = json.loads(line)
            merge = structural_merge(
                t["original"], t["update"], t.get("language", ""), t.get("path")
            )
            plan = plan_regions(t["original"], t["update"], merge, ApplySettings(), force=True)
            if plan is None:
                continue
            seen += 1
            assert _rebuilt(plan) == merge.text, t["id"]
            covered = sum(w.end - w.start for w in plan.windows)
            assert covered < len(t["original"].splitlines()), t["id"]
    assert seen >= 3


def test_engine_region_runs_the_model_on_the_window_only() -> None:
    merge = structural_merge(ORIG, SNIP, "python")
    # A short window: the fake copies by 3-token context, and class B's twin body would loop it.
    plan = plan_regions(ORIG, SNIP, merge, ApplySettings(region_context=2))
    assert plan is not None
    (win,) = plan.windows
    rt = FakeRuntime(follow="```\n" + win.merged + "```\n", n_ctx=8192)
    cfg = EngineConfig().override(kind="reference", region_context=2)
    # The region path itself: the target's choice among placements, tried first, is off.
    cfg = replace(cfg, apply=replace(cfg.apply, choose_max=0))
    eng = Engine(rt, None, cfg)
    deltas: list[str] = []
    res = eng.apply(ORIG, SNIP, path="x.py", on_delta=deltas.append)
    assert res.engine == "region" and res.text == merge.text, res.raw
    assert "".join(deltas) == res.text
    assert res.regions[0]["lines"] == [win.start + 1, win.end]
    assert res.stats.output_tokens < len(rt.tokenize(ORIG)) / 2
    assert [v["status"] for v in res.verdicts] == ["exact", "ambiguous"]
    # The fake wrote exactly the merge's unsure guess in a window short of the other place the
    # check allows (class B): it could not have written that one, so it confirms nothing.
    assert any(
        p.startswith(
            f"the answer for lines {win.start + 1}-{win.end} is the structural merge's own guess"
        )
        for p in res.suspect
    ), res.suspect
    whole = eng.apply(ORIG, SNIP, path="x.py", engine="model")
    assert whole.engine == "model" and not whole.regions


def test_a_window_holding_every_allowed_placement_confirms_the_guess() -> None:
    # Class A's `run` and class B's both take the edit; a window over both lets the model
    # write either, so writing the merge's is the target's own choice, not a copy.
    short, wide = _plan(region_context=2), _plan(region_context=8)
    assert short is not None and wide is not None
    assert [w.holds_all for w in short.windows] == [False]
    assert [w.holds_all for w in wide.windows] == [True]
    assert _rebuilt(wide) == structural_merge(ORIG, SNIP, "python").text
    guessed = run_regions(wide, lambda w, cb: _answer(w.merged), None, ORIG)
    assert guessed.suspect == []
    guessed = run_regions(short, lambda w, cb: _answer(w.merged), None, ORIG)
    assert len(guessed.suspect) == 1 and "own guess" in guessed.suspect[0]


@pytest.mark.parametrize("engine", ["auto", "region"])
def test_region_result_json_fields(engine: str) -> None:
    merge = structural_merge(ORIG, SNIP, "python")
    plan = plan_regions(ORIG, SNIP, merge, ApplySettings(region_context=2))
    assert plan is not None
    rt = FakeRuntime(follow="```\n" + plan.windows[0].merged + "```\n", n_ctx=8192)
    cfg = EngineConfig().override(kind="reference", region_context=2)
    cfg = replace(cfg, apply=replace(cfg.apply, choose_max=0))  # the region path itself
    res = Engine(rt, None, cfg).apply(ORIG, SNIP, path="x.py", engine=engine)
    d = res.to_dict()
    assert d["engine"] == "region" and d["regions"][0]["output_tokens"] > 0

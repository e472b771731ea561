"""The target's choice inside the windows the model would rewrite (`apply.choose_windows`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from edge_spec.apply.choose import HunkChoice, allowed, chosen_text
from edge_spec.apply.choose_windows import WindowChoice, window_readings
from edge_spec.apply.merge import structural_merge
from edge_spec.apply.region import plan_regions
from edge_spec.config.settings import ApplySettings, EngineConfig
from edge_spec.engine import Engine
from edge_spec.runtimes.fake import FakeRuntime


def _methods(prefix: str, n: int) -> str:
    return "".join(
        f"\n    fun {prefix}{i}(x: Int): Int {{\n        val y = x + {i}\n        return y * {i}\n    }}\n"
        for i in range(n)
    )


def _overloads(name: str, flag: str = "requireValid", body: int = 0) -> str:
    # Two overloads end with the same parameter lines: a snippet showing only those lines and
    # a new body fits both, so the merge is unsure which one it rewrites.
    return (
        f"\n    fun {name}Stream(\n        stream: InputStream,\n"
        f"        {flag}: Boolean = false,\n    ): Source {{\n"
        "        val p = load(stream)\n"
        + "".join(f"        p.check({k})\n" for k in range(body))
        + "        return from(p)\n    }\n"
        f"\n    fun {name}File(\n        file: File,\n"
        f"        {flag}: Boolean = false,\n    ): Source {{\n"
        "        val p = Properties()\n        p.load(file)\n        return from(p)\n    }\n"
    )


ORIG = "class Source {\n" + _methods("f", 20) + _overloads("a") + _methods("g", 20) + "}\n"
TWO = ORIG[:-2] + _overloads("b", "strict") + _methods("h", 20) + "}\n"
HUNK = (
    "        requireValid: Boolean = false,\n    ): Source {\n"
    "        return from(file.toPath(), requireValid)\n    }\n"
)
SNIPPET = f"// ... existing code ...\n{HUNK}// ... existing code ...\n"
SNIPPET2 = (
    f"// ... existing code ...\n{HUNK}// ... existing code ...\n"
    f"{HUNK.replace('requireValid', 'strict')}// ... existing code ...\n"
)


def _fixed(scores: dict[int, tuple[float, ...]]):  # noqa: ANN202
    """A stand-in for the target's scoring: per window (by its first line) fixed scores."""

    def score(rt, original, merge, choices, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        out = []
        for wc in choices:
            hunks = tuple(
                replace(c, scores=scores[wc.window.start][: len(c.edits)]) for c in wc.hunks
            )
            out.append(WindowChoice(wc.window, hunks))
        return out

    return score


def _readings(original: str, snippet: str) -> list[WindowChoice]:
    merge = structural_merge(original, snippet, "kotlin")
    plan = plan_regions(original, snippet, merge, ApplySettings())
    assert plan is not None and not merge.exact
    return window_readings(original, snippet, merge, plan, ApplySettings())


def _favour(wc: WindowChoice, start: int, lead: float) -> tuple[float, ...]:
    """Scores giving the reading that starts at original line `start` (0-based) `lead`."""
    return tuple(lead if e.start == start else 0.0 for e in wc.hunks[0].edits)


def test_a_window_with_a_clear_winner_is_the_answer() -> None:
    (wc,) = _readings(ORIG, SNIPPET)
    own = wc.hunks[0].edits[0]  # the merge's guess: the first overload's parameter lines
    other = next(e for e in wc.hunks[0].edits if e.start > own.end)
    want = ORIG.splitlines(keepends=True)
    want[other.start : other.end] = [ln + "\n" for ln in other.lines]
    mp = pytest.MonkeyPatch()
    with mp.context() as m:
        m.setattr(
            "edge_spec.engine.score_windows",
            _fixed({wc.window.start: _favour(wc, other.start, 30)}),
        )
        res = Engine(FakeRuntime()).apply(ORIG, SNIPPET, lang="kotlin")
    assert res.engine == "choice" and res.text == "".join(want)
    assert [c["chosen"] for c in res.choice] == [True]
    assert not any("narrow lead" in w for w in res.warnings)


def test_a_window_without_a_clear_winner_is_written_from_the_prompt_already_scored() -> None:
    # The target scored the readings as answers to the window's prompt: writing the window then
    # reuses that prompt whole, evaluated in the shapes a fresh prefill would use.
    cfg = EngineConfig().override(kind="reference", choose_margin=1000.0)
    (wc,) = _readings(ORIG, SNIPPET)
    rt = FakeRuntime(follow="```kotlin\n" + wc.window.merged + "```\n", n_ctx=16384)
    res = Engine(rt, None, cfg).apply(ORIG, SNIPPET, lang="kotlin")
    assert res.engine == "region" and [c["chosen"] for c in res.choice] == [False]
    (region,) = res.regions
    assert res.stats.cached_tokens == region["prompt_tokens"] - 1 > 0
    mp = pytest.MonkeyPatch()
    with mp.context() as m:  # the same window, nothing scored before the model writes it
        m.setattr("edge_spec.engine.window_readings", lambda *a, **k: [])
        rt = FakeRuntime(follow="```kotlin\n" + wc.window.merged + "```\n", n_ctx=16384)
        fresh = Engine(rt, None, cfg).apply(ORIG, SNIPPET, lang="kotlin")
    assert fresh.stats.cached_tokens == 0 and fresh.text == res.text


def test_a_clear_window_is_settled_and_the_model_writes_the_other() -> None:
    first, second = _readings(TWO, SNIPPET2)
    a = next(e for e in first.hunks[0].edits if e.start > first.hunks[0].edits[0].end)
    scores = {first.window.start: _favour(first, a.start, 8.0), second.window.start: (0.0,) * 8}
    rt = FakeRuntime(follow="```kotlin\n" + second.window.merged + "```\n", n_ctx=16384)
    mp = pytest.MonkeyPatch()
    with mp.context() as m:
        m.setattr("edge_spec.engine.score_windows", _fixed(scores))
        res = Engine(rt, None, EngineConfig().override(kind="reference")).apply(
            TWO, SNIPPET2, lang="kotlin"
        )
    assert res.engine == "region"
    assert [(c["hunk"], c["chosen"]) for c in res.choice] == [(1, True), (2, False)]
    assert [r["hunks"] for r in res.regions] == [[2]]  # the chosen window is not rewritten
    lines = TWO.splitlines()
    assert res.text.splitlines()[: a.start] == lines[: a.start]
    assert res.text.splitlines()[a.start : a.start + len(a.lines)] == list(a.lines)
    # chosen by a lead under `choose_warn`: the user is told where to look
    assert any(w.startswith("hunk 1 went to original lines") for w in res.warnings)


THIRD = (
    "\n    fun fromUrl(\n        url: URL,\n        requireValid: Boolean = false,\n"
    "    ): Source {\n        val p = fetch(url)\n        return from(p)\n    }\n"
)


@pytest.mark.parametrize(("gap", "held"), [(2, True), (8, False)])
def test_a_window_grows_over_readings_nearby(gap: int, held: bool) -> None:
    # The snippet's context fits a third method too, past the window's context lines: near,
    # the window grows over it, so the target can choose it there; far, it does not.
    original = "class Source {\n" + _methods("f", 20) + _overloads("a") + _methods("k", gap)
    original += THIRD + _methods("g", 20) + "}\n"
    settings = replace(ApplySettings(), choose_max=8, region_context=14)
    merge = structural_merge(original, SNIPPET, "kotlin")
    plan = plan_regions(original, SNIPPET, merge, settings)
    assert plan is not None
    (w,) = plan.windows
    third = original.splitlines().index("    fun fromUrl(")
    assert w.holds_all == held and (w.end > third) == held
    inside = window_readings(original, SNIPPET, merge, plan, settings)
    assert (inside is not None and len(inside) == 1) == held
    if not held:  # the readings far out are told apart in a window of their own
        (c,) = allowed(original, SNIPPET, merge, settings) or []
        scored = [HunkChoice(c.hunk, c.edits, (30.0,) + (0.0,) * (len(c.edits) - 1))]
        mp = pytest.MonkeyPatch()
        with mp.context() as m:
            m.setattr("edge_spec.engine.choose", lambda *a, **k: scored)
            cfg = EngineConfig().override(choose_max=8, region_context=14)
            res = Engine(FakeRuntime(), None, cfg).apply(original, SNIPPET, lang="kotlin")
        assert res.engine == "choice" and res.text == chosen_text(original, merge, scored)

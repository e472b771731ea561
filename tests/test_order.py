"""The order guard: an apply answer keeps the original's order and skips only where the snippet says."""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path

import pytest

from edge_spec.apply.guard import lines_guard
from edge_spec.apply.markers import snippet_markers
from edge_spec.apply.merge import detect_language
from edge_spec.apply.naive import MARKER
from edge_spec.config.settings import ControllerSettings, EngineConfig
from edge_spec.core.controller import Controller
from edge_spec.core.loop import GenConfig, generate
from edge_spec.core.order import LineOrder, OrderState
from edge_spec.drafters.reference import ReferenceDrafter
from edge_spec.engine import Engine
from edge_spec.runtimes.fake import FakeRuntime

DEV = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "code_apply_dev_small.jsonl"


def _keys(lines: list[bytes]) -> list[bytes]:
    return [ln.strip(b" \t") for ln in lines if ln.strip(b" \t")]


def _depth(ln: bytes) -> int:
    return len(ln.expandtabs(4)) - len(ln.expandtabs(4).lstrip(b" \t"))


def _definition(original: list[bytes], snippet: list[tuple[bytes, bool]],
                answer: list[bytes]) -> tuple[bool, bool]:
    """By enumeration: (some reading of `answer` keeps the rules, the answer may end there)."""
    raw = [ln for ln in original if ln.strip(b" \t")]
    orig = [ln.strip(b" \t") for ln in raw]
    items = [(ln.strip(b" \t"), m) for ln, m in snippet if ln.strip(b" \t")]
    shown = [k for k, m in items if not m]
    wide: dict[bytes, int] = {}  # a hunk's last line -> its most lines at the hunk's depth
    hunk: list[bytes] = []
    for ln, m in [*(x for x in snippet if x[0].strip(b" \t")), (b"", True)]:
        if not m:
            hunk.append(ln)
        elif hunk:
            base = min(_depth(h) for h in hunk)
            key = hunk[-1].strip(b" \t")
            wide[key] = max(wide.get(key, 0), sum(_depth(h) == base for h in hunk))
            hunk = []
    ans = _keys(answer)

    def insert_ok(key: bytes, last: bytes) -> bool:
        return any(k == key and not m and (i == 0 or items[i - 1][1] or items[i - 1][0] == last)
                   for i, (k, m) in enumerate(items))

    def skip_ok(p: int, wrote: bool, j: int, last: bytes) -> bool:
        if orig[j] in shown:
            resumes = any(k == orig[j] and i > 0 and not items[i - 1][1] and items[i - 1][0] == last
                          for i, (k, m) in enumerate(items) if not m)
            return resumes and (wrote or (p >= 0 and orig[p] in shown))
        if last not in wide or p < 0:
            return False
        skipped = [_depth(raw[k]) for k in range(p + 1, j)]
        low, land = min(skipped), _depth(raw[j])
        return land < low or (land == low and skipped.count(low) <= wide[last])

    @cache
    def finals(i: int) -> frozenset[tuple[int, bool]]:
        """Every reading of the first i answer lines: (last copied line, snippet lines since)."""
        if i == 0:
            return frozenset({(-1, False)})
        key, last = ans[i - 1], ans[i - 2] if i >= 2 else b""
        out: set[tuple[int, bool]] = set()
        for p, wrote in finals(i - 1):
            if insert_ok(key, last):
                out.add((p, True))
            out.update((j, False) for j in range(p + 1, len(orig)) if orig[j] == key
                       and (j == p + 1 or skip_ok(p, wrote, j, last)))
        return frozenset(out)

    ok = all(finals(i) for i in range(len(ans) + 1))
    end = ok and (any(p == len(orig) - 1 for p, _ in finals(len(ans))) or (
        bool(items) and not items[-1][1] and bool(ans) and ans[-1] == shown[-1]))
    return ok, end


def _walk(order: LineOrder, answer: list[bytes]) -> tuple[bool, bool]:
    state = OrderState()
    for key in _keys(answer):
        state = order.step(state, key)
        if state.pos is None:
            return False, False
    return True, order.may_end(state)


def _random_case(rng: random.Random) -> tuple[list[bytes], list[tuple[bytes, bool]], list[bytes]]:
    words = [b"a", b"b", b"c", b"}", b"x = 1"]
    original = [b" " * rng.choice((0, 0, 2, 4)) + rng.choice(words) for _ in range(rng.randint(0, 7))]
    snippet = [(b" " * rng.choice((0, 2, 4)) + rng.choice(words + [b"new"]), False)
               if rng.random() < 0.75 else (b"# ...", True)
               for _ in range(rng.randint(0, 5))]
    pool = _keys(original) + [k for k, m in snippet if not m] + [b"", b"zz"]
    answer = [rng.choice(pool) for _ in range(rng.randint(0, 8))]
    return original, snippet, answer


def test_random_answers_agree_with_the_definition() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        original, snippet, answer = _random_case(rng)
        order = LineOrder(original, snippet)
        assert _walk(order, answer) == _definition(original, snippet, answer), (original, snippet,
                                                                                answer)


def test_barred_lines_are_the_ones_no_reading_reaches() -> None:
    rng = random.Random(11)
    for _ in range(800):
        original, snippet, answer = _random_case(rng)
        order = LineOrder(original, snippet)
        state = OrderState()
        for key in _keys(answer):
            nxt = order.step(state, key)
            if nxt.pos is None:
                break
            state = nxt
        barred = order.barred(state)
        for key in set(_keys(original)):
            reached = order.step(state, key).pos is not None
            assert (key in barred) == (not reached), (original, snippet, answer, key)


def _dev_tasks() -> list[dict]:
    ex = DEV.parents[2] / "examples" / "apply"  # a method replaced with no context line
    demo = {"id": "demo", "language": "python", "original": (ex / "original.py").read_text(),
            "update": (ex / "update.py").read_text(), "expected": (ex / "expected.py").read_text()}
    return [demo] + [json.loads(x) for x in DEV.read_text().splitlines() if x.strip()]


@pytest.mark.parametrize("task", _dev_tasks(), ids=lambda t: t["id"])
def test_every_expected_dev_file_keeps_the_order(task: dict) -> None:
    original, update = task["original"], task["update"]
    own = set(snippet_markers(original, update, detect_language(task.get("language") or "")))
    snippet = [(ln.encode(), bool(MARKER.match(ln)) or ln.strip() in own)
               for ln in update.split("\n")]
    order = LineOrder([ln.encode() for ln in original.split("\n")], snippet)
    assert _walk(order, [ln.encode() for ln in task["expected"].split("\n")]) == (True, True)


ORIG = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(6))
SNIPPET = ["# ... existing code ...", "def f3(x):", "    return x * 3", "# ... existing code ..."]
# A lazy target: copies the start, writes the snippet's hunk and stops.
LAZY = "def f0(x):\n    return x + 0\n\ndef f3(x):\n    return x * 3\n```\n"
MARKED = [(ln, ln.startswith("# ...")) for ln in SNIPPET]


def _run(rt: FakeRuntime, order: bool, drafters: list, fixed_k: int | None = None):  # noqa: ANN202
    guard = lines_guard(ORIG, MARKED, ("\n```",), rt.token_bytes, rt.n_vocab, order=order)
    prompt = rt.tokenize("Apply:\n" + ORIG + "\nAnswer:\n```\n", add_bos=True)
    cfg = GenConfig(max_tokens=400, stop=("\n```",), guard=guard, fixed_k=fixed_k)
    ctl = Controller(ControllerSettings(verify_ms={1: 10.0, 128: 11.0}))
    return generate(rt, prompt, drafters, ctl, cfg, [LAZY, ORIG])


def test_the_order_keeps_a_lazy_target_from_stopping_after_the_hunk() -> None:
    lines = _run(FakeRuntime(follow="```\n" + LAZY), False, [])
    assert "def f5(x):" not in lines.text  # the lines guard lets it stop there
    ordered = _run(FakeRuntime(follow="```\n" + LAZY), True, [])
    ok, end = _definition([ln.encode() for ln in ORIG.split("\n")],
                          [(ln.encode(), m) for ln, m in MARKED],
                          [ln.encode() for ln in ordered.text.split("\n")])
    assert ok, ordered.text
    tail = ordered.text.split("\n")
    spilled = len(tail) - max(i for i, ln in enumerate(tail) if ln.strip()) - 1 > 1
    if ordered.stats.finish_reason == "stop" and not spilled:
        assert end and "def f5(x):" in ordered.text, ordered.text


def test_past_more_blank_lines_than_the_texts_have_the_answer_may_end() -> None:
    rt = FakeRuntime()
    guard = lines_guard(ORIG, MARKED, ("\n```",), rt.token_bytes, rt.n_vocab)
    fence = rt.tokenize("```", special=False)[0]
    state = guard.advance(guard.start(b"```\n"), b"def f0(x):\n")
    for blanks in range(1, 4):
        state = guard.advance(state, b"\n")
        allowed = set(guard.banned(state).ids.tolist())
        assert (fence in allowed) == (blanks > 1)  # ORIG has one blank line in a row at most


@pytest.mark.parametrize("fixed_k", [None, 1, 4, 32])
def test_speculative_equals_plain_under_the_order_guard(fixed_k: int | None) -> None:
    plain = _run(FakeRuntime(follow="```\n" + LAZY), True, [])
    rt = FakeRuntime(follow="```\n" + LAZY)
    spec = _run(rt, True, [ReferenceDrafter(rt)], fixed_k)
    assert spec.tokens == plain.tokens
    assert spec.stats.drafted > 0


def test_engine_apply_keeps_the_order_by_default() -> None:
    rt = FakeRuntime(follow="```\n" + LAZY, n_ctx=8192)
    eng = Engine(rt, None, EngineConfig().override(kind="reference"))
    upd = "\n".join(SNIPPET)
    assert EngineConfig().apply.guard == "order"
    lines = eng.apply(ORIG, upd, engine="model", guard="lines")
    assert "def f5(x):" not in lines.text  # stopped after the hunk
    ordered = eng.apply(ORIG, upd, engine="model")
    assert ordered.text == eng.apply(ORIG, upd, engine="model", guard="order").text
    assert ordered.text != lines.text and ordered.suspect

"""The order guard: an apply answer keeps the original's order and skips only where the snippet says."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import pytest

from edge_spec.apply.guard.build import indentations, lines_guard
from edge_spec.apply.guard.context import context_pairs, hunk_follows
from edge_spec.apply.guard.lineset import LineSet, VocabIndex
from edge_spec.apply.guard.order import LineOrder, OrderState
from edge_spec.apply.merge import detect_language, structural_merge
from edge_spec.apply.merge.markers import snippet_markers
from edge_spec.apply.merge.naive import MARKER
from edge_spec.config.settings import ControllerSettings, EngineConfig
from edge_spec.core.controller import Controller
from edge_spec.core.loop import GenConfig, generate
from edge_spec.drafters.reference import ReferenceDrafter
from edge_spec.engine import Engine
from edge_spec.runtimes.fake import FakeRuntime

DEV = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "code_apply_dev_small.jsonl"


def _keys(lines: list[bytes]) -> list[bytes]:
    return [ln.strip(b" \t") for ln in lines if ln.strip(b" \t")]


def _depth(ln: bytes) -> int:
    return len(ln.expandtabs(4)) - len(ln.expandtabs(4).lstrip(b" \t"))


def _gaps(lines: list[bytes]) -> list[int]:
    """For each non-blank line, the blank lines right before it."""
    out, run = [], 0
    for ln in lines:
        if ln.strip(b" \t"):
            out.append(run)
            run = 0
        else:
            run += 1
    return out


def _definition(
    original: list[bytes],
    snippet: list[tuple[bytes, bool]],
    answer: list[bytes],
    aligned: Sequence[tuple[int, int]] = (),
) -> tuple[bool, bool]:
    """By enumeration: (some reading of `answer` keeps the rules, the answer may end there)."""
    raw = [ln for ln in original if ln.strip(b" \t")]
    orig = [ln.strip(b" \t") for ln in raw]
    ogap, sgap, agap = _gaps(original), _gaps([ln for ln, _ in snippet]), _gaps(answer)
    ogap[:1] = [0] * len(ogap[:1])  # the file's opening blank lines are not asked for
    items = [(ln.strip(b" \t"), m) for ln, m in snippet if ln.strip(b" \t")]
    shown = [k for k, m in items if not m]
    wide: dict[bytes, int] = {}  # a hunk's last line -> its most lines at the hunk's depth
    end_depth: dict[bytes, int] = {}  # ... and its depth (where it first ends a hunk)
    hunk: list[bytes] = []
    for ln, m in [*(x for x in snippet if x[0].strip(b" \t")), (b"", True)]:
        if not m:
            hunk.append(ln)
        elif hunk:
            base = min(_depth(h) for h in hunk)
            key = hunk[-1].strip(b" \t")
            wide[key] = max(wide.get(key, 0), sum(_depth(h) == base for h in hunk))
            end_depth.setdefault(key, _depth(hunk[-1]))
            hunk = []
    # Pins: an aligned original line whose hunk goes on with another line than the original's.
    onum = {n: i for i, n in enumerate(n for n, ln in enumerate(original) if ln.strip(b" \t"))}
    snum = {n: i for i, n in enumerate(n for n, (ln, _) in enumerate(snippet) if ln.strip(b" \t"))}
    pins: dict[int, tuple[bytes, int]] = {}  # -> the line that follows, after so many blanks
    for o, sn in aligned:
        p, i = onum.get(o), snum.get(sn)
        if (
            p is not None
            and i is not None
            and i + 1 < len(items)
            and not items[i + 1][1]
            and items[i][0] == orig[p]
            and (p + 1 == len(orig) or orig[p + 1] != items[i + 1][0])
        ):
            pins.setdefault(p, (items[i + 1][0], sgap[i + 1]))
    context = {onum[o] for o, _ in aligned if o in onum}
    read = {
        snum[sn]
        for o, sn in aligned
        if sn in snum and o in onum and raw[onum[o]].rstrip(b" \t") == snippet[sn][0].rstrip(b" \t")
    }
    # Lines the snippet shows only as context: never new code.
    only_context = {k for i, (k, _) in enumerate(items) if i in read} - {
        k for i, (k, m) in enumerate(items) if not m and i not in read
    }
    ctx_of = {snum[sn]: onum[o] for o, sn in aligned if sn in snum and snum[sn] in read}
    next_of = {p: {ctx_of[i + 1]} if i + 1 in ctx_of else set() for i, p in ctx_of.items()}
    # Lines shown only in hunks some context line of which a sure placement reads.
    hunk_of = [sum(m for _, m in items[: i + 1]) for i in range(len(items))]
    sure_hunks = {hunk_of[i] for i in read}
    sure = {k for i, (k, _) in enumerate(items) if hunk_of[i] in sure_hunks} - {
        k for i, (k, m) in enumerate(items) if not m and hunk_of[i] not in sure_hunks
    }
    ans = _keys(answer)

    def goes_on(i: int, last: bytes, blanks: int) -> bool:
        """Snippet line i follows `last` in a hunk, with at least its blank lines before it."""
        return i > 0 and not items[i - 1][1] and items[i - 1][0] == last and blanks >= sgap[i]

    def start_ok(key: bytes) -> bool:  # (a sure hunk that opens with context: as its copy)
        return any(
            k == key and not m and (i == 0 or items[i - 1][1]) and i not in read
            for i, (k, m) in enumerate(items)
        )

    def on_ok(key: bytes, last: bytes, blanks: int) -> bool:
        return any(
            k == key and not m and goes_on(i, last, blanks) for i, (k, m) in enumerate(items)
        )

    def past(p: int, last: bytes) -> int:
        return next(
            (
                j + 1
                for j in range(p + 1, len(orig))
                if orig[j] == last and _depth(raw[j]) == end_depth.get(last)
            ),
            len(orig),
        )

    def skip_ok(p: int, k: int, j: int, last: bytes, blanks: int) -> bool:
        if orig[j] in shown:
            resumes = any(
                key == orig[j] and goes_on(i, last, blanks)
                for i, (key, m) in enumerate(items)
                if not m
            )
            here = k != 0 or last not in sure or p in context  # (as for new code below)
            if k == 0 and p in next_of:  # from a sure hunk's context: where its next line is
                return resumes and j in next_of[p]
            return (
                resumes
                and here
                and (k != 0 or (p >= 0 and orig[p] in shown))
                and (orig[j] not in only_context or j in context)
            )
        if last not in wide or p < 0 or k >= 0 or j > past(p, last):
            return False
        skipped = [_depth(raw[x]) for x in range(p + 1, j)]
        low, land = min(skipped), _depth(raw[j])
        return land < low or (land == low and skipped.count(low) <= wide[last])

    @cache
    def finals(i: int) -> frozenset[tuple[int, int]]:
        """Every reading of the first i answer lines: (last copied line, snippet lines since:
        0 none, n > 0 that many equal to the original's next ones, -1 otherwise)."""
        if i == 0:
            return frozenset({(-1, 0)})
        key, last, blanks = ans[i - 1], ans[i - 2] if i >= 2 else b"", agap[i - 1]
        out: set[tuple[int, int]] = set()
        for p, k in finals(i - 1):
            if k == 0 and p in pins and pins[p] != (key, blanks):
                continue  # a hunk's context line: the hunk goes on, spaced as the snippet is
            # A sure hunk goes on from the copy of its own context line, not another copy.
            here = k != 0 or last not in sure or p in context
            if key not in only_context and (start_ok(key) or (on_ok(key, last, blanks) and here)):
                same = k >= 0 and p + k + 1 < len(orig) and orig[p + k + 1] == key
                if not same or p + k + 1 not in context:  # a context line is no new code
                    out.add((p, k + 1 if same else -1))
            out.update(
                (j, 0)
                for j in range(p + 1, len(orig))
                if orig[j] == key
                and (
                    (j == p + 1 and blanks >= ogap[j])
                    or (j > p + 1 and skip_ok(p, k, j, last, blanks))
                )
            )
        return frozenset(out)

    ok = all(finals(i) for i in range(len(ans) + 1))
    end = ok and (
        any(p == len(orig) - 1 and (k != 0 or p not in pins) for p, k in finals(len(ans)))
        or (bool(items) and not items[-1][1] and bool(ans) and ans[-1] == shown[-1])
    )
    return ok, end


def _walk(order: LineOrder, answer: list[bytes]) -> tuple[bool, bool]:
    state = OrderState()
    for key, blanks in zip(_keys(answer), _gaps(answer), strict=True):
        state = order.step(state, key, blanks)
        if state.pos is None:
            return False, False
    return True, order.may_end(state)


def _aligned(
    rng: random.Random, original: list[bytes], snippet: list[tuple[bytes, bool]]
) -> list[tuple[int, int]]:
    """Random context pairs: snippet lines read as equal original lines (as a merge would)."""
    pairs = [
        (o, s)
        for o, a in enumerate(original)
        for s, (b, m) in enumerate(snippet)
        if not m and a.strip(b" \t") and a.strip(b" \t") == b.strip(b" \t")
    ]
    return rng.sample(pairs, min(len(pairs), rng.randint(0, 2)))


def _random_case(rng: random.Random) -> tuple[list[bytes], list[tuple[bytes, bool]], list[bytes]]:
    words = [b"a", b"b", b"c", b"}", b"x = 1", b""]  # blank lines too: their counts matter
    original = [
        b" " * rng.choice((0, 0, 2, 4)) + rng.choice(words) for _ in range(rng.randint(0, 7))
    ]
    snippet = [
        (b" " * rng.choice((0, 2, 4)) + rng.choice(words + [b"new"]), False)
        if rng.random() < 0.75
        else (b"# ...", True)
        for _ in range(rng.randint(0, 5))
    ]
    pool = _keys(original) + [k for k, m in snippet if not m] + [b"", b"zz"]
    answer = [rng.choice(pool) for _ in range(rng.randint(0, 8))]
    return original, snippet, answer


def test_random_answers_agree_with_the_definition() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        original, snippet, answer = _random_case(rng)
        aligned = _aligned(rng, original, snippet)
        order = LineOrder(original, snippet, aligned)
        assert _walk(order, answer) == _definition(original, snippet, answer, aligned), (
            original,
            snippet,
            answer,
            aligned,
        )


def test_barred_lines_are_the_ones_no_reading_reaches() -> None:
    rng = random.Random(11)
    for _ in range(800):
        original, snippet, answer = _random_case(rng)
        order = LineOrder(original, snippet, _aligned(rng, original, snippet))
        state = OrderState()
        for key, blanks in zip(_keys(answer), _gaps(answer), strict=True):
            nxt = order.step(state, key, blanks)
            if nxt.pos is None:
                break
            state = nxt
        for blanks in range(3):
            barred = order.barred(state, blanks)
            for key in set(_keys(original + [k for k, m in snippet if not m])):
                reached = order.step(state, key, blanks).pos is not None
                assert (key in barred) == (not reached), (original, snippet, answer, key, blanks)


def _dev_tasks() -> list[dict]:
    ex = DEV.parents[2] / "examples" / "apply"  # a method replaced with no context line
    demo = {
        "id": "demo",
        "language": "python",
        "original": (ex / "original.py").read_text(),
        "update": (ex / "update.py").read_text(),
        "expected": (ex / "expected.py").read_text(),
    }
    return [demo] + [json.loads(x) for x in DEV.read_text().splitlines() if x.strip()]


@pytest.mark.parametrize("task", _dev_tasks(), ids=lambda t: t["id"])
def test_every_expected_dev_file_keeps_the_order(task: dict) -> None:
    original, update = task["original"], task["update"]
    own = set(snippet_markers(original, update, detect_language(task.get("language") or "")))
    snippet = [
        (ln.encode(), bool(MARKER.match(ln)) or ln.strip() in own) for ln in update.split("\n")
    ]
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
    orig, snippet = [ln.encode() for ln in ORIG.split("\n")], [(ln.encode(), m) for ln, m in MARKED]
    answer = [ln.encode() for ln in ordered.text.split("\n")]
    ok, end = _definition(orig, snippet, answer)
    if not ok:  # the order let go, and only where it left no line to write (a dead end)
        kept = max(n for n in range(len(answer)) if _definition(orig, snippet, answer[:n])[0])
        rt = FakeRuntime()
        guard = lines_guard(ORIG, MARKED, ("\n```",), rt.token_bytes, rt.n_vocab)
        state = guard.advance(guard.start(b"```\n"), b"".join(ln + b"\n" for ln in answer[:kept]))
        assert guard.dead_end(state), ordered.text
        assert not _definition(orig, snippet, answer[:kept])[1]  # nor could it end there
    tail = ordered.text.split("\n")
    spilled = len(tail) - max(i for i, ln in enumerate(tail) if ln.strip()) - 1 > 1
    if ordered.stats.finish_reason == "stop" and not spilled:
        assert (end or not ok) and "def f5(x):" in ordered.text, ordered.text


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


def _order(original: str, snippet: str) -> LineOrder:
    return LineOrder(
        [ln.encode() for ln in original.split("\n")],
        [(ln.encode(), ln.startswith("# ...")) for ln in snippet.split("\n")],
    )


def test_a_copied_run_keeps_at_least_its_blank_lines() -> None:
    order = _order("import os\n\n\ndef f():\n    pass", "# ...\n    pass\n\n    return 1\n# ...")
    state = order.step(OrderState(), b"import os")
    assert b"def f():" in order.barred(state, 1)  # one blank line where the original has two
    assert b"def f():" not in order.barred(state, 2)
    assert b"def f():" not in order.barred(state, 3)  # more is the model's own call
    # In a hunk, the snippet's spacing counts: it shows a blank line before `return 1`.
    inside = order.step(order.step(state, b"def f():", 2), b"pass", 0)
    assert b"return 1" in order.barred(inside, 0)
    assert order.step(inside, b"return 1", 1).pos is not None
    assert _walk(order, [b"import os", b"", b"def f():", b"    pass", b"", b"    return 1"]) == (
        False,
        False,
    )
    assert _walk(
        order, [b"import os", b"", b"", b"def f():", b"    pass", b"", b"    return 1"]
    ) == (True, True)


def test_a_hunk_that_ends_on_a_line_of_the_original_resumes_there() -> None:
    # The snippet shows only `import os` before its marker: nothing after it is replaced.
    order = _order("import os\nimport sys\n\nx = 1", "import os\n# ... existing code ...")
    state = order.step(OrderState(), b"import os")
    assert b"x = 1" in order.barred(state)  # dropping `import sys` is no merge
    assert _walk(order, [b"import os", b"import sys", b"", b"x = 1"]) == (True, True)
    # A hunk of new lines still replaces the block it stands for (a method replaced by name).
    method = _order(
        "class A:\n    def f(self):\n        return 1\n\n    def g(self):\n        pass",
        "# ...\n    def f(self):\n        return 2\n# ...",
    )
    assert _walk(
        method,
        [
            b"class A:",
            b"    def f(self):",
            b"        return 2",
            b"",
            b"    def g(self):",
            b"        pass",
        ],
    ) == (True, True)


def test_the_copy_of_a_hunks_context_line_goes_on_with_the_hunk() -> None:
    original = "import os\nimport sys\n\nimport pytest"
    snippet = "import os\nimport sys\nimport typing\n\nimport pytest\n# ... existing code ..."
    copied = [b"import os", b"import sys", b"", b"import pytest"]  # the edit left out
    merged = [b"import os", b"import sys", b"import typing", b"", b"import pytest"]
    free = _order(original, snippet)
    assert _walk(free, copied) == (True, True)
    # A sure placement reads both imports as the hunk's context: after `import sys` it goes on.
    order = LineOrder(
        [ln.encode() for ln in original.split("\n")],
        [(ln.encode(), ln.startswith("# ...")) for ln in snippet.split("\n")],
        [(0, 0), (1, 1), (3, 4)],
    )
    state = order.step(order.step(OrderState(), b"import os"), b"import sys")
    assert b"import pytest" in order.barred(state)
    assert b"import typing" not in order.barred(state)
    # ... spaced as the snippet has it: no blank line may come first.
    assert order.blank_room(state, 0) == 0 and b"import typing" in order.barred(state, 1)
    assert free.blank_room(free.step(free.step(OrderState(), b"import os"), b"import sys"), 0) > 9
    assert _walk(order, copied) == (False, False)
    assert _walk(order, merged) == (True, True)


def test_at_a_dead_end_the_guard_lets_the_order_go() -> None:
    # "a", then "a" again, then "b": every reading is past "c" or spent, and the order may not
    # end (c, the last line, is not copied). Ending there would drop c; the lines rules go on.

    vocab = [b"", b"a", b"b", b"c", b"\n", b"```"]
    index = VocabIndex(lambda t: vocab[t], len(vocab))
    original, snippet = [b"b", b"a", b"c"], [(b"# ...", True), (b"a", False), (b"# ...", True)]
    lines = [*original, b"a"]

    def guard(order: bool) -> LineSet:
        return LineSet(
            index,
            lines,
            [b"```"],
            [b"c", b"a"],
            LineOrder(original, snippet) if order else None,
            spill=1,
        )

    ordered, free = guard(True), guard(False)
    state, loose = ordered.start(b"```\n"), free.start(b"```\n")
    for piece in (b"a\n", b"a\n", b"b\n"):
        state, loose = ordered.advance(state, piece), free.advance(loose, piece)
    assert state.order is not None and state.order.pos  # readings are left, yet none goes on
    got = ordered.banned(state)
    assert set(got.ids.tolist()) == set(free.banned(loose).ids.tolist())
    assert 3 in got.ids.tolist() and 0 not in got.ids.tolist()  # "c", not the end of text
    # Before the dead end the order still bars: after "a" only the order's lines.
    first = ordered.advance(ordered.start(b"```\n"), b"a\n")
    assert set(ordered.banned(first).ids.tolist()) < set(
        free.banned(free.advance(free.start(b"```\n"), b"a\n")).ids.tolist()
    )


def test_the_order_guard_keeps_each_lines_indentation() -> None:
    rt = FakeRuntime()
    guard = lines_guard(ORIG, MARKED, ("\n```",), rt.token_bytes, rt.n_vocab)
    space, r, d = (rt.tokenize(c, special=False)[0] for c in (" ", "r", "d"))
    four = set(guard.banned(guard.advance(guard.start(b"```\n"), b"def f0(x):\n    ")).ids.tolist())
    assert r in four and space not in four  # "    return x + 0", never deeper
    two = set(guard.banned(guard.advance(guard.start(b"```\n"), b"def f0(x):\n  ")).ids.tolist())
    assert space in two and r not in two and d not in two


def test_a_reindented_snippet_leaves_indentation_free() -> None:

    original = ["class A:", "    def f(self):", "        return 1", ""]
    kept = indentations(original, ["    def f(self):", "        return 2"], ["```"])
    assert kept is not None and kept[b"return 2"] == {b"        "} and kept[b"```"] == {b""}
    # The method shown at the margin: its new lines' place in the file is not their own.
    assert indentations(original, ["def f(self):", "    return 2"], ["```"]) is None


def test_a_sure_hunks_leading_context_pairs_with_the_line_it_stands_on() -> None:
    # The longest equal run would pair the snippet's first `});` with the original's only one
    # through the new block's own `});`; the placement anchors the leading context instead.
    original = (
        "test('first', async t => {\n  t.is(await compute(41), 42);\n});\n\n"
        "test('last', async t => {\n  t.pass();\n});\n"
    )
    update = (
        "// ... existing code ...\n  t.is(await compute(41), 42);\n});\n\n"
        "test('middle', async t => {\n  t.truthy(await compute(1));\n});\n\n"
        "test('last', async t => {\n  t.pass();\n// ... existing code ...\n"
    )
    merge = structural_merge(original, update, "javascript")
    assert merge.exact
    assert (2, 2) in context_pairs(original, update, merge)  # `});`: the original's line 2


def test_the_copy_of_the_line_before_a_sure_insertion_goes_on_with_it() -> None:
    original = "def a():\n    return 1\n\n\ndef c():\n    return 3\n"
    update = (
        "# ... existing code ...\ndef b():\n    return 2\n\n\ndef c():\n# ... existing code ...\n"
    )
    merge = structural_merge(original, update, "python")
    follows = hunk_follows(original, merge)
    assert merge.exact and follows == [(1, b"def b():", 2)]
    snippet = [(ln.encode(), ln.startswith("# ...")) for ln in update.split("\n")]
    order = LineOrder([ln.encode() for ln in original.split("\n")], snippet, (), follows)
    state = order.step(order.step(OrderState(), b"def a():"), b"return 1")
    assert b"def c():" in order.barred(state, 2)  # not past the insertion
    assert b"def b():" not in order.barred(state, 2)
    assert _walk(order, [ln.encode() for ln in merge.text.split("\n")]) == (True, True)


def test_a_sure_hunks_context_line_is_a_copy_and_keeps_the_spacing_after_it() -> None:
    # Written after the hunk's new line, `# HTML` could also be read as new code standing in for
    # the original's lines, and the skip on from there would take `html_theme` with no blank line.
    original = "}\nheading = 3\n\n# HTML\n\nhtml_theme = 'click'\nhtml_logo = 'logo'\n"
    update = "# ... existing code ...\n}\nextensions = []\nheading = 3\n\n# HTML\n# ... existing code ...\n"
    merge = structural_merge(original, update, "python")
    aligned = context_pairs(original, update, merge)
    assert merge.exact and (3, 5) in aligned
    snippet = [(ln.encode(), ln.startswith("# ...")) for ln in update.split("\n")]
    order = LineOrder([ln.encode() for ln in original.split("\n")], snippet, aligned)
    free = LineOrder([ln.encode() for ln in original.split("\n")], snippet)
    tight = [
        b"}",
        b"extensions = []",
        b"heading = 3",
        b"",
        b"# HTML",
        b"html_theme = 'click'",
        b"html_logo = 'logo'",
    ]
    assert _walk(free, tight) == (True, True)
    assert _walk(order, tight) == (False, False)
    assert _walk(order, [ln.encode() for ln in merge.text.split("\n")]) == (True, True)


def test_a_sure_hunk_goes_on_only_where_it_stands() -> None:
    # `@pytest.mark.parametrize(` opens many tests. The hunk's new one follows the line it
    # stands on (`click.style(...)`), so an earlier copy of it may not go on with the hunk.
    original = (
        '@pytest.mark.parametrize(\n    "value",\n    [1],\n)\ndef test_a(value):\n'
        '    click.style(value)\n\n\n@pytest.mark.parametrize(("t", "e"), [1])\n'
        "def test_b(t, e):\n    assert t == e\n"
    )
    update = (
        "# ... existing code ...\n    click.style(value)\n\n\n@pytest.mark.parametrize(\n"
        '    ("t", "e"),\n    [1],\n)\ndef test_b(t, e):\n    assert t == e\n'
    )
    merge = structural_merge(original, update, "python")
    assert merge.exact and merge.text.count("@pytest.mark.parametrize(\n") == 2
    snippet = [(ln.encode(), ln.startswith("# ...")) for ln in update.split("\n")]
    order = LineOrder(
        [ln.encode() for ln in original.split("\n")],
        snippet,
        context_pairs(original, update, merge),
    )
    free = LineOrder([ln.encode() for ln in original.split("\n")], snippet)
    early = [
        b"@pytest.mark.parametrize(",
        b'    ("t", "e"),',
        b"    [1],",
        b")",
        b"def test_b(t, e):",
        b"    assert t == e",
    ]
    assert _walk(free, early)[0] and not _walk(order, early)[0]
    assert _walk(order, [ln.encode() for ln in merge.text.split("\n")]) == (True, True)


def test_an_unsure_hunks_unique_context_goes_on_with_the_hunk() -> None:
    # Whether `enable_metrics()` is inserted or replaces `load_plugins()` is unclear, but
    # `configure_logging()` is the original's only copy either way: an answer that copies on past
    # it leaves the snippet's line out, and the guard bars that.
    original = (
        "def setup():\n    configure_logging()\n    load_plugins()\n    return True\n\n\n"
        "def run():\n    return 1\n"
    )
    update = "# ... existing code ...\n    configure_logging()\n    enable_metrics()\n# ... existing code ...\n"
    merge = structural_merge(original, update, "python")
    assert not merge.exact
    aligned = context_pairs(original, update, merge)
    assert aligned == [(1, 1)]
    snippet = [(ln.encode(), ln.startswith("# ...")) for ln in update.split("\n")]
    order = LineOrder([ln.encode() for ln in original.split("\n")], snippet, aligned)
    free = LineOrder([ln.encode() for ln in original.split("\n")], snippet)
    left_out = [ln.encode() for ln in original.split("\n")]
    assert _walk(free, left_out)[0] and not _walk(order, left_out)[0]
    for right in (merge.text, merge.text.replace("    load_plugins()\n", "")):
        assert _walk(order, [ln.encode() for ln in right.split("\n")]) == (True, True)


def test_unique_lines_in_another_order_pin_nothing() -> None:
    # The snippet moves `load_plugins()` above `configure_logging()`: where it lands it is new
    # code, so neither line is read as context of the unsure hunk.
    original = "def setup():\n    configure_logging()\n    load_plugins()\n    return True\n"
    update = (
        "# ... existing code ...\n    load_plugins()\n    configure_logging()\n"
        "    enable_metrics()\n# ... existing code ...\n"
    )
    merge = structural_merge(original, update, "python")
    assert not merge.exact
    assert context_pairs(original, update, merge) == []

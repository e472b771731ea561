"""The lines guard: an apply answer may write only lines of the original and the snippet."""

from __future__ import annotations

import random

import pytest

from edge_spec.apply.guard.build import lines_guard
from edge_spec.apply.guard.lines import line_context
from edge_spec.apply.guard.lineset import LineSet, VocabIndex
from edge_spec.apply.guard.order import LineOrder
from edge_spec.config.settings import ControllerSettings, EngineConfig, SamplingSettings
from edge_spec.core.controller import Controller
from edge_spec.core.loop import GenConfig, generate
from edge_spec.drafters.reference import ReferenceDrafter
from edge_spec.engine import Engine
from edge_spec.runtimes.base import Only
from edge_spec.runtimes.fake import FakeRuntime

ORIG = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(6))
SNIPPET = ["# ... existing code ...", "def f3(x):", "    return x * 3  # tripled", ""]
# What a lazy target would write: a marker, a comment out of the instruction, a reworded line.
LAZY = (
    "def f0(x):\n    return x + 0\n\n# Triple f3 as asked\n# ... existing code ...\n"
    "def f3(x):\n    return 3 * x\n```\n"
)

_WORDS = [
    b"",
    b" ",
    b"  ",
    b"    ",
    b"\t",
    b"\n",
    b"\n\n",
    b"\n    ",
    b":\n",
    b"):\n",
    b"def",
    b" f",
    b"f",
    b"0",
    b"3",
    b"(x",
    b"(x):",
    b"):",
    b" return",
    b"return",
    b" x",
    b" +",
    b" *",
    b" 3",
    b" 0",
    b"  #",
    b" #",
    b"#",
    b" tri",
    b"pled",
    b" tripled",
    b"\xc3",
    b"\xa9",
    b"\xc3\xa9",
    b" ...",
    b"...",
    b"```",
    b"```\n",
    b" = 1",
    b"x",
    b"x = 1",
    b"x = 1 ",
    b"1 ",
    b"\n\n    return",
    b"\n# no",
    b" \n",
    b"    return x",
    b"\r",
    b"\x0c",
    b"y = 2 ",
    b" 2  ",
    b"2  \n",
    b" 2",
]
_LINES = [
    b"def f0(x):",
    b"    return x + 0",
    b"x = 1",
    b"y = 2  ",
    b"caf\xc3\xa9 = 2",
    b"    return x * 3  # tripled",
    b"```",
    b"def f3(x):",
]


def _brute(
    lines: list[bytes],
    vocab: list[bytes],
    ctx: bytes,
    ends: list[bytes] = (),
    tails: list[bytes] = (),
    spent: frozenset[bytes] = frozenset(),
    indents: dict[bytes, set[bytes]] | None = None,
) -> set[int]:
    """The allowed ids by definition, simulated on the text: every line a token completes is
    allowed (not spent: written as often as `lines` has it) or blank, an end line only after a
    tail line (or once every tail is spent), the line it leaves open can still become one, and
    a control token ends a complete line that may end the answer. With `indents`, a line
    named there has one of its indentations (blank lines may carry any)."""
    ws = b" \t"

    def fits(seg: bytes) -> bool:
        key = seg.strip(ws)
        return (
            indents is None
            or key not in indents
            or seg[: len(seg) - len(seg.lstrip(ws))] in indents[key]
        )

    def forms(xs: list[bytes]) -> set[bytes]:
        return {x.lstrip(ws) for x in xs if x.strip(ws)} | {x.strip(ws) for x in xs if x.strip(ws)}

    body, fin, tail_forms = forms(lines), forms(lines) | forms(ends), forms(tails)
    tail_keys = {t.strip(ws) for t in tail_forms}

    def tail(line: bytes) -> bool:
        return not tail_forms or line in tail_forms or tail_keys <= spent

    def allowed(regime: bool) -> set[bytes]:
        return {f for f in (fin if regime else body) if f.strip(ws) not in spent}

    def after(regime: bool, seg: bytes) -> bool:
        return regime if not seg.strip(ws) else tail(seg.strip(ws))

    def complete(seg: bytes, regime: bool, lenient: bool = False) -> bool:
        return not seg.strip(ws) or (seg.lstrip(ws) in allowed(regime) and (lenient or fits(seg)))

    def open_(seg: bytes, regime: bool, lenient: bool = False) -> bool:
        key = seg.lstrip(ws)
        pad = seg[: len(seg) - len(key)]
        return not key or any(
            f.startswith(key) and (lenient or fits(pad + f)) for f in allowed(regime)
        )

    *before, line = ctx.split(b"\n")
    first = before[0].strip(ws) if before else b""
    start = tail(first) if first else (not tail_forms or tail_keys <= spent)
    # A line whose text no allowed line with its indentation starts is held to its text
    # alone (only a token that completes a line and opens the next, judged by the counts
    # before it, leaves one so).
    lenient = bool(line.lstrip(ws)) and not open_(line, start)
    out = set()
    for tid, tok in enumerate(vocab):
        regime = start
        if not tok:
            ok = complete(line, regime, lenient) and after(regime, line)
        else:
            *done, last = (line + tok).split(b"\n")
            ok = True
            for n, seg in enumerate(done):
                ok = ok and complete(seg, regime, lenient and n == 0)
                regime = after(regime, seg)
            ok = ok and open_(last, regime, lenient and not done)
        if ok:
            out.add(tid)
    return out


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"    ",
        b"def",
        b"def f",
        b"def f0(x):",
        b"    return x",
        b"    return x + 0",
        b"x = 1",
        b"x = ",
        b"caf\xc3",
        b"    return x * 3 ",
        b"``",
        b"\t",
        b"y = 2",
        b"y = 2 ",
        b"y = ",
    ],
)
@pytest.mark.parametrize("prev", [b"", b"x = 1\n", b"def f3(x):\n\n", b"```py\n"])
def test_the_allowed_ids_are_the_definitions(line: bytes, prev: bytes) -> None:
    ends, tails = [b"```"], [b"def f3(x):", b"y = 2  "]
    ls = LineSet(VocabIndex(lambda t: _WORDS[t], len(_WORDS)), _LINES, ends, tails)
    got = ls.banned(prev + line)
    if not isinstance(got, Only):  # a line no allowed token leads to is left free
        assert not _brute(_LINES, [w for w in _WORDS if w], prev + line, ends, tails)
        return
    assert set(got.ids.tolist()) == _brute(_LINES, _WORDS, prev + line, ends, tails), line


def test_line_context_keeps_the_last_non_blank_line() -> None:
    assert line_context(b"a\nb\n\n  \nc") == b"b\n\n  \nc"
    assert line_context(b"a\nb") == b"a\nb"
    assert line_context(b"\n\nx") == b"\n\nx"
    assert line_context(b"abc") == b"abc"


def test_the_answer_ends_only_after_a_last_line() -> None:
    ix = VocabIndex(lambda t: _WORDS[t], len(_WORDS))
    ls = LineSet(ix, [ln for ln in _LINES if ln != b"```"], [b"```"], [b"def f3(x):"])
    fence, eos = _WORDS.index(b"```"), _WORDS.index(b"")
    for ctx in (b"x = 1\n", b"x = 1\n\n", b"```py\n", b"x = 1"):
        ids = set(ls.banned(ctx).ids.tolist())
        assert fence not in ids and eos not in ids, ctx
    for ctx in (b"def f3(x):\n", b"    def f3(x):\n\n", b"def f3(x):"):
        assert eos in set(ls.banned(ctx).ids.tolist()), ctx
    assert fence in set(ls.banned(b"def f3(x):\n").ids.tolist())


def test_a_line_the_guard_never_allowed_is_left_free() -> None:
    # Only the prompt's last line can be one (the guard keeps every line it sees open).
    ls = LineSet(VocabIndex(lambda t: _WORDS[t], len(_WORDS)), _LINES)
    got = ls.banned(b"x = 1 ")
    assert not isinstance(got, Only) and got.size == 0


def test_random_vocabularies_agree_with_the_definition() -> None:
    rng = random.Random(7)
    alphabet = [b"a", b"b", b" ", b"\n", b"(", b")", b"#", b"\xc3", b"\xa9"]
    for _ in range(30):
        vocab = [b""] + sorted(
            {b"".join(rng.choices(alphabet, k=rng.randint(1, 4))) for _ in range(120)}
        )
        lines = [
            b"".join(rng.choices(alphabet[:3] + alphabet[4:], k=rng.randint(1, 8)))
            for _ in range(6)
        ]
        ends, tails = [b"##"], lines[-1:]
        ls = LineSet(VocabIndex(lambda t, v=vocab: v[t], len(vocab)), lines, ends, tails)
        for prev in (b"", lines[-1] + b"\n", lines[0] + b"\n \n"):
            for n in range(0, 6):
                ctx = prev + lines[0][:n]
                got = ls.banned(ctx)
                ids = set(got.ids.tolist()) if isinstance(got, Only) else None
                assert ids == _brute(lines, vocab, ctx, ends, tails), (lines, ctx)


def test_walks_through_the_guard_agree_with_the_definition() -> None:
    # Lines repeat (counts matter), tails end the answer, and a walk spends lines as it goes.
    rng = random.Random(11)
    alphabet = [b"a", b"b", b" ", b"\n", b"(", b")", b"\xc3", b"\xa9"]
    for _ in range(400):
        vocab = [b""] + sorted(
            {b"".join(rng.choices(alphabet, k=rng.randint(1, 4))) for _ in range(150)}
        )
        base = [
            b"".join(rng.choices(alphabet[:3] + alphabet[4:], k=rng.randint(1, 6)))
            for _ in range(5)
        ]
        lines = base + rng.choices(base, k=3)
        ends, tails = [b"##"], [base[-1]]
        ls = LineSet(VocabIndex(lambda t, v=vocab: v[t], len(vocab)), lines, ends, tails)
        state = ls.start(b"```\n")
        for _step in range(40):
            got = ls.banned(state)
            if not isinstance(got, Only) or not got.ids.size:
                break
            want = _brute(lines, vocab, state.ctx, ends, tails, state.spent)
            assert set(got.ids.tolist()) == want, (lines, state)
            tok = int(rng.choice(got.ids.tolist()))
            if not vocab[tok]:
                break
            state = ls.advance(state, vocab[tok])


def test_no_line_is_written_more_often_than_the_texts_have_it() -> None:
    rt = FakeRuntime(follow="```\n" + "def f0(x):\n    return x + 0\n" * 6 + "```\n")
    res = _run(rt, _guard(rt), [ReferenceDrafter(rt)])
    assert res.text.count("def f0(x):") == 1, res.text  # once in the original, never in the snippet


def _run(rt: FakeRuntime, guard, drafters, fixed_k=None):  # noqa: ANN001, ANN202
    prompt = rt.tokenize("Apply:\n" + ORIG + "\nAnswer:\n```\n", add_bos=True)
    cfg = GenConfig(max_tokens=200, stop=("\n```",), guard=guard, fixed_k=fixed_k)
    ctl = Controller(ControllerSettings(verify_ms={1: 10.0, 128: 11.0}))
    return generate(rt, prompt, drafters, ctl, cfg, [LAZY, ORIG])


def _guard(rt: FakeRuntime):  # noqa: ANN202
    return lines_guard(
        ORIG, [(ln, i == 0) for i, ln in enumerate(SNIPPET)], ("\n```",), rt.token_bytes, rt.n_vocab
    )


def _allowed_lines() -> set[str]:
    return {ln.strip() for ln in ORIG.splitlines() + SNIPPET[1:]} | {"```", ""}


def test_the_guarded_target_writes_only_allowed_lines() -> None:
    lazy = _run(FakeRuntime(follow="```\n" + LAZY), None, [])
    assert "# Triple f3 as asked" in lazy.text and "# ... existing code ..." in lazy.text
    res = _run(FakeRuntime(follow="```\n" + LAZY), _guard(FakeRuntime()), [])
    assert res.text.strip()
    assert all(ln.strip() in _allowed_lines() for ln in res.text.splitlines()), res.text


@pytest.mark.parametrize("fixed_k", [None, 1, 3, 16, 64])
def test_speculative_equals_plain_under_the_lines_guard(fixed_k: int | None) -> None:
    plain = _run(FakeRuntime(follow="```\n" + LAZY), _guard(FakeRuntime()), [])
    rt = FakeRuntime(follow="```\n" + LAZY)
    spec = _run(rt, _guard(rt), [ReferenceDrafter(rt)], fixed_k)  # its reference is lazy
    assert spec.tokens == plain.tokens
    assert spec.stats.drafted > 0


def test_sampling_under_the_lines_guard_keeps_to_the_lines() -> None:
    rt = FakeRuntime(follow="```\n" + LAZY, sharpness=1.0)
    prompt = rt.tokenize("Apply:\n" + ORIG + "\nAnswer:\n```\n", add_bos=True)
    for seed in range(3):
        cfg = GenConfig(
            max_tokens=120,
            stop=("\n```",),
            guard=_guard(rt),
            sampling=SamplingSettings(temperature=1.0, seed=seed),
        )
        ctl = Controller(ControllerSettings(verify_ms={1: 10.0, 128: 11.0}))
        res = generate(rt, prompt, [ReferenceDrafter(rt)], ctl, cfg, [LAZY, ORIG])
        done = res.text.split("\n")[:-1]  # the last line may be cut by max_tokens
        assert all(ln.strip() in _allowed_lines() for ln in done), res.text


def test_engine_apply_guards_by_lines_by_default_and_takes_the_other_modes() -> None:
    rt = FakeRuntime(follow="```\n" + LAZY, n_ctx=8192)
    eng = Engine(rt, None, EngineConfig().override(kind="reference"))
    upd = "\n".join(SNIPPET)
    lines = eng.apply(ORIG, upd, engine="model")
    assert "# Triple f3 as asked" not in lines.text and not lines.lazy_lines
    markers = eng.apply(ORIG, upd, engine="model", guard="markers")
    assert "# Triple f3 as asked" in markers.text and not markers.lazy_lines
    off = eng.apply(ORIG, upd, engine="model", guard="off")
    assert off.lazy_lines


def test_walks_keep_each_lines_indentation_when_asked() -> None:
    # The same walks, with each line held to the indentations the lines give it.
    rng = random.Random(12)
    alphabet = [b"a", b"b", b" ", b"\n", b"(", b")", b"\t"]
    for _ in range(400):
        vocab = [b""] + sorted(
            {b"".join(rng.choices(alphabet, k=rng.randint(1, 4))) for _ in range(150)}
        )
        base = [
            rng.choice([b"", b" ", b"  ", b"\t"])
            + b"".join(rng.choices([b"a", b"b", b"(", b")"], k=rng.randint(1, 5)))
            for _ in range(5)
        ]
        lines = base + rng.choices(base, k=3)
        indents: dict[bytes, set[bytes]] = {}
        for ln in lines:
            indents.setdefault(ln.strip(b" \t"), set()).add(ln[: len(ln) - len(ln.lstrip(b" \t"))])
        ends, tails = [b"##"], [base[-1]]
        ls = LineSet(
            VocabIndex(lambda t, v=vocab: v[t], len(vocab)), lines, ends, tails, indents=indents
        )
        state = ls.start(b"```\n")
        for _step in range(40):
            got = ls.banned(state)
            if not isinstance(got, Only) or not got.ids.size:
                break
            want = _brute(lines, vocab, state.ctx, ends, tails, state.spent, indents)
            assert set(got.ids.tolist()) == want, (lines, state)
            tok = int(rng.choice(got.ids.tolist()))
            if not vocab[tok]:
                break
            state = ls.advance(state, vocab[tok])


def test_indentation_opens_only_toward_a_line_it_fits() -> None:
    # No padded blank lines in the texts (spill given): indentation must lead to a line.
    vocab = [b"", b" ", b"  ", b"    ", b"        ", b"\t", b"x", b"y", b"\n", b"\n    "]
    index = VocabIndex(lambda t: vocab[t], len(vocab))
    ls = LineSet(index, [b"x", b"    y", b"x"], spill=1, indents={b"x": [b""], b"y": [b"    "]})
    allowed = set(ls.banned(ls.advance(ls.start(b"```\n"), b"x\n")).ids.tolist())
    assert {1, 2, 3, 6, 9} <= allowed  # toward "    y"; "x" at no indentation; "\n    "
    assert not {4, 5} & allowed  # eight blanks, a tab: no line has them
    two = set(ls.banned(ls.advance(ls.start(b"```\n"), b"x\n  ")).ids.tolist())
    assert 2 in two and 6 not in two and 7 not in two  # "  " more, not "x" nor "y" yet


def test_no_token_pads_a_blank_line_where_the_texts_have_none() -> None:
    vocab = [b"", b"x", b"y", b"\n", b"  \n", b"\n  \n", b"\n\n", b"x\n  \ny"]
    index = VocabIndex(lambda t: vocab[t], len(vocab))
    ls = LineSet(index, [b"x", b"", b"", b"y"], spill=2)
    start = set(ls.banned(ls.start(b"```\n")).ids.tolist())
    assert {1, 3} <= start and 4 not in start  # a blank line, but not "  " on it
    after = set(ls.banned(ls.advance(ls.start(b"```\n"), b"x")).ids.tolist())
    assert {3, 6} <= after and not {5, 7} & after  # nor one a token writes past its newline
    padded = LineSet(index, [b"x", b"  ", b"y"], spill=2)  # the texts pad one: so may the answer
    assert {4, 5} <= set(
        padded.banned(padded.advance(padded.start(b"```\n"), b"x\n")).ids.tolist()
    ) | set(padded.banned(padded.advance(padded.start(b"```\n"), b"x")).ids.tolist())


def test_a_line_ends_with_the_newlines_the_next_line_needs_in_one_token() -> None:
    # The original keeps two blank lines before `y`. "x\n" would leave only a blank line to
    # write, and a model has never seen one written apart from the newlines before it.
    vocab = [b"", b"x", b"y", b"z", b"\n", b"\n\n", b"\n\n\n", b"x\n", b"x\n\n", b"x\n\n\n"]
    index = VocabIndex(lambda t: vocab[t], len(vocab))
    original = [b"x", b"", b"", b"y", b"z"]
    ls = LineSet(index, original, spill=3, order=LineOrder(original, []))
    first = set(ls.banned(ls.start(b"```\n")).ids.tolist())
    assert 9 in first and not {7, 8} & first  # "x\n\n\n", not "x\n" nor "x\n\n"
    after_x = set(ls.banned(ls.advance(ls.start(b"```\n"), b"x")).ids.tolist())
    assert 6 in after_x and not {4, 5} & after_x
    # Where the run needs more newlines than one token has, the longest one that fits.
    one = [b"", b"x", b"y", b"\n", b"\n\n", b"x\n", b"x\n\n"]
    short = LineSet(
        VocabIndex(lambda t: one[t], len(one)), original, spill=3, order=LineOrder(original, [])
    )
    assert set(short.banned(short.start(b"```\n")).ids.tolist()) & {5, 6} == {6}
    assert set(short.banned(short.advance(short.start(b"```\n"), b"x")).ids.tolist()) & {3, 4} == {
        4
    }
    # Right after `y` no blank line is owed: "y\n" stays.
    walk = ls.advance(ls.advance(ls.start(b"```\n"), b"x\n\n\n"), b"y")
    assert 4 in set(ls.banned(walk).ids.tolist())


def test_after_the_last_line_only_the_blank_lines_the_original_ends_with() -> None:
    # After the original's last line only the end is left: "x\n" then the fence, not a blank
    # line first. A file that ends with a blank line keeps it.
    vocab = [b"", b"a", b"x", b"\n", b"\n\n", b"x\n", b"x\n\n", b"```"]
    index = VocabIndex(lambda t: vocab[t], len(vocab))
    for original, want in (([b"a", b"x", b""], 5), ([b"a", b"x", b"", b""], 6)):
        ls = LineSet(index, original, [b"```"], order=LineOrder(original, []), spill=2)
        allowed = set(ls.banned(ls.advance(ls.start(b"```\n"), b"a\n")).ids.tolist())
        assert allowed & {5, 6} == {want}

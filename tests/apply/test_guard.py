"""The decode-time guard: no marker line the original lacks, and speculative == plain under it."""

from __future__ import annotations

import re

import pytest

from edge_spec.apply.guard.build import apply_guard
from edge_spec.apply.merge.naive import MARKER
from edge_spec.config.settings import ControllerSettings, EngineConfig
from edge_spec.core.controller import Controller
from edge_spec.core.loop import GenConfig, generate
from edge_spec.drafters.reference import ReferenceDrafter
from edge_spec.engine import Engine
from edge_spec.runtimes.fake import FakeRuntime

ORIG = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(8))
LAZY = (
    "def f0(x):\n    return x + 0\n\n# ... existing code ...\n\ndef f5(x):\n"
    "    return x * 5\n\n# ... existing code ...\n"
)
FOLLOW = "```\n" + LAZY


def _guard(rt: FakeRuntime, original: str = ORIG):  # noqa: ANN202
    return apply_guard(original, lambda t: rt.token_bytes(t).decode("utf-8", "ignore"), rt.n_vocab)


def _run(rt: FakeRuntime, guard, drafters, fixed_k=None):  # noqa: ANN001, ANN202
    prompt = rt.tokenize("Apply:\n" + ORIG + "\nAnswer:\n```\n", add_bos=True)
    cfg = GenConfig(max_tokens=160, guard=guard, fixed_k=fixed_k)
    ctl = Controller(ControllerSettings(verify_ms={1: 10.0, 128: 11.0}))
    return generate(rt, prompt, drafters, ctl, cfg, [LAZY, ORIG])


def test_the_unguarded_target_writes_markers_and_the_guarded_never() -> None:
    rt = FakeRuntime(follow=FOLLOW)
    assert any(MARKER.match(ln) for ln in _run(rt, None, []).text.splitlines())
    res = _run(FakeRuntime(follow=FOLLOW), _guard(rt), [])
    assert res.text and not any(MARKER.match(ln) for ln in res.text.splitlines()), res.text
    assert not any(re.match(r"\s*#\s*\.\.\.", ln) for ln in res.text.splitlines())


@pytest.mark.parametrize("fixed_k", [None, 1, 4, 16, 64])
def test_speculative_equals_plain_under_the_guard(fixed_k: int | None) -> None:
    plain = _run(FakeRuntime(follow=FOLLOW), _guard(FakeRuntime()), [])
    rt = FakeRuntime(follow=FOLLOW)
    spec = _run(rt, _guard(rt), [ReferenceDrafter(rt)], fixed_k)  # its reference has markers
    assert spec.tokens == plain.tokens
    assert spec.stats.drafted > 0


def test_code_that_looks_like_an_ellipsis_is_allowed() -> None:
    rt = FakeRuntime()
    g = _guard(rt)

    def allowed(line: str, nxt: str) -> bool:
        return rt.tokenize(nxt)[0] not in set(g.banned(line).tolist())

    assert allowed("  ..", ".")  # `...` alone: Python's Ellipsis, a stub body
    assert allowed("  ...", "a")  # `...args`: a JavaScript spread
    assert allowed("... x =", " ")  # a doctest continuation line
    assert not allowed("    # ..", ".")  # `# ...`
    assert not allowed("// ..", ".")
    assert not allowed("... existin", "g")  # `... existing code ...`
    # A marker form the original writes itself is not banned.
    own = _guard(rt, ORIG + "# ... generated below ...\n")
    assert rt.tokenize(".")[0] not in set(own.banned("# ..").tolist())


def test_engine_apply_uses_the_guard_and_can_drop_it() -> None:
    rt = FakeRuntime(follow="```\n" + LAZY + "```\n", n_ctx=8192)
    eng = Engine(rt, None, EngineConfig().override(kind="reference"))
    upd = "# ... existing code ...\ndef f5(x):\n    return x * 5\n# ... existing code ...\n"
    off = eng.apply(ORIG, upd, engine="model", guard=False)
    assert off.lazy_lines  # the unguarded fake copies the markers
    on = eng.apply(ORIG, upd, engine="model")
    assert not on.lazy_lines


@pytest.mark.real
def test_guard_on_smollm2_plain_equals_speculative(smollm2_path) -> None:  # noqa: ANN001
    from conftest import load_tasks
    from lossless import assert_same_or_near_tie

    eng = Engine(
        str(smollm2_path), None, EngineConfig().override(n_ctx=4096, threads=2, kind="reference")
    )
    for t in load_tasks(n=1):
        args = (t["original"], t["update"], t["instruction"])
        plain = eng.apply(*args, draft="none", engine="model", max_tokens=120)
        spec = eng.apply(*args, draft="reference", engine="model", max_tokens=120)
        assert not plain.lazy_lines and not spec.lazy_lines
        assert_same_or_near_tie(eng.target, plain.extra["prompt"], plain.raw, spec.raw, t["id"])


def test_the_snippets_own_reworded_markers_are_banned_and_detected() -> None:
    lazy = LAZY.replace("# ... existing code ...", "# rest of the file stays the same")
    upd = (
        "# rest of the file stays the same\ndef f5(x):\n    return x * 5\n"
        "# rest of the file stays the same\n"
    )
    rt = FakeRuntime(follow="```\n" + lazy + "```\n", n_ctx=8192)
    eng = Engine(rt, None, EngineConfig().override(kind="reference"))
    off = eng.apply(ORIG, upd, engine="model", guard=False)
    assert off.lazy_lines and "# rest of the file stays the same" in off.text
    on = eng.apply(ORIG, upd, engine="model")
    assert "# rest of the file stays the same" not in on.text and not on.lazy_lines
    # An ordinary comment that only starts like the marker's first words stays allowed.
    g = apply_guard(
        ORIG,
        lambda t: rt.token_bytes(t).decode("utf-8", "ignore"),
        rt.n_vocab,
        markers=["# nothing changes in the file below"],
    )
    assert rt.tokenize("f")[0] not in set(g.banned("# nothing changes in the ").tolist())
    assert rt.tokenize("w")[0] in set(g.banned("# nothing changes in the file belo").tolist())


def _brute(guard, texts: list[str], line: str) -> set[int]:  # noqa: ANN001
    """The banned set by definition: every segment of line + token checked against the regex."""
    key = line.lstrip()
    if not guard._risky.fullmatch(key):
        return {
            t
            for t, x in enumerate(texts)
            if "\n" in x and any(guard._forbidden.match(s) for s in x.split("\n")[1:])
        }
    return {
        t
        for t, x in enumerate(texts)
        if any(guard._forbidden.match(s) for s in (key + x).split("\n"))
    }


_VOCAB = [
    "",
    " ",
    "  ",
    "\n",
    "\n#",
    "\n# ...",
    "#",
    "# ",
    "//",
    "/",
    "/*",
    "...",
    "..",
    ".",
    "…",
    " ...",
    " existing",
    " Existing",
    "existing",
    " code",
    "code",
    " c",
    "ode",
    " file",
    " rest",
    " of",
    " the",
    " The",
    " users",
    "\n// existing code",
    " codes",
    "x",
    " = 1",
    "\t",
    "é",
    "中文",
    " remaining",
    " methods",
    " Rest",
    " OF",
    " Code",
    "\n    # rest of the file",
    " implementation",
    "   ",
    " ex",
    "isting",
    " rest of",
    "ore",
    " other",
    " more",
]


@pytest.mark.parametrize(
    "line",
    [
        "",
        "    ",
        "#",
        "# ",
        "# ex",
        "# existing",
        "# existing ",
        "# Existing c",
        "// rest",
        "// rest of",
        "// Rest OF the",
        "x = 1",
        "# ..",
        "/",
        "/* the rest of",
        "# users",
        "é",
    ],
)
def test_the_fast_scan_bans_what_the_definition_bans(line: str) -> None:
    g = apply_guard(ORIG, lambda t: _VOCAB[t], len(_VOCAB), markers=["# keep going here"])
    assert set(g.banned(line).tolist()) == _brute(g, _VOCAB, line), line


def test_markers_in_the_models_own_words_are_banned_and_real_comments_are_not() -> None:
    g = apply_guard(ORIG, lambda t: _VOCAB[t], len(_VOCAB))

    def banned(line: str, tok: str) -> bool:
        return _VOCAB.index(tok) in set(g.banned(line).tolist())

    # `# existing code ...`, `# Existing code continues here...`: the ellipsis comes last.
    assert banned("#", " existing") and banned("    #", " Existing")
    assert banned("# ex", "isting") and banned("// rest", " of") and banned("# The rest", " of")
    assert banned("# other", " code") and banned("/* more", " methods")
    assert banned("", "\n// existing code") and banned("x = 1", "\n    # rest of the file")
    assert not banned("# the", " users") and not banned("# other", " users")
    assert not banned("# rest", "ore")  # `# restore the state`
    assert not banned("#", " Rest") and banned("# Rest", " of")  # the next token decides
    assert not banned("x = 1  #", " existing")  # not at the start of the line
    # An original that opens a comment so keeps the form allowed.
    own = apply_guard(ORIG + "# Existing tests stay below\n", lambda t: _VOCAB[t], len(_VOCAB))
    assert _VOCAB.index(" existing") not in set(own.banned("#").tolist())


@pytest.mark.parametrize(
    "line",
    [
        "# ... existing code ...",
        "    // ...",
        "… rest",
        "... existing code",
        "// ` ... existing code ...",
        "#-...",
        "#  # existing code",
        "# existing code ...",
        "#_existing!code...",
        "// `existing!` code",
        "/* the rest of the file */",
        "# Remaining methods",
        "-- more code",
        "{/* other components */}",
        "<!-- unchanged -->",
        "# keep going here",
    ],
)
def test_every_prefix_of_a_banned_line_is_watched(line: str) -> None:
    """The guard only rescans lines its `risky` pattern calls open: every proper prefix of a
    banned line must be one, or the token completing the line slips through."""
    g = apply_guard(ORIG, lambda t: _VOCAB[t], len(_VOCAB), markers=["# keep going here"])
    assert g._forbidden.match(line), line
    cut = g._forbidden.match(line).end()
    for n in range(cut):
        assert g._risky.fullmatch(line[:n].lstrip()), (line, line[:n])

"""The target's choice among the placements a snippet allows (`apply.choose`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from mined import dev_task

from edge_spec.apply.choose import HunkChoice, allowed, chosen_text, score_texts
from edge_spec.apply.merge import structural_merge
from edge_spec.apply.merge.candidates import alternative_edits
from edge_spec.apply.merge.syntax import definitions, loses_definitions, parse
from edge_spec.apply.readings import readings
from edge_spec.config.settings import ApplySettings
from edge_spec.engine import Engine
from edge_spec.runtimes.fake import FakeRuntime


class ByteModel:
    """A unit-test target over bytes: the logits after any prefix favour one byte."""

    n_vocab, n_batch = 256, 7

    def __init__(self, liked: int) -> None:
        self.liked = liked
        self.tokens: list[int] = []
        self.evals = 0

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def tokenize(self, text: str, **_: object) -> list[int]:
        return list(text.encode())

    def truncate(self, n: int) -> None:
        del self.tokens[n:]

    def eval(self, tokens: Sequence[int], rows: Sequence[int] | None = None) -> np.ndarray:
        self.evals += 1
        self.tokens += list(tokens)
        out = np.zeros((len(rows or []), self.n_vocab), dtype=np.float32)
        out[:, self.liked] = 3.0
        return out


def _logp(model: ByteModel, text: str) -> float:
    row = np.zeros(256)
    row[model.liked] = 3.0
    logz = np.log(np.exp(row).sum())
    return float(sum(row[b] - logz for b in text.encode()))


def test_scores_are_the_log_likelihood_from_where_the_texts_part() -> None:
    rt = ByteModel(ord("a"))
    texts = ["xxaaaa" * 30, "xxab" * 40]  # longer than a block of logits rows
    got = score_texts(rt, [1, 2, 3], texts)  # type: ignore[arg-type]
    shared = 3  # "xxa"
    want = [_logp(rt, t[shared:]) for t in texts]
    assert got == pytest.approx(want, rel=1e-6)
    assert rt.tokens[:3] == [1, 2, 3]  # the prompt stays cached for the next request


def test_scoring_stops_a_tail_after_the_texts_rejoin() -> None:
    rt = ByteModel(ord("a"))
    rest = "zzzz" * 50  # the window's lines after the readings, the same for both
    texts = ["xxq" + rest, "xxrr" + rest]
    got = score_texts(rt, [1, 2, 3], texts, tail=5)  # type: ignore[arg-type]
    want = [_logp(rt, "q" + rest[:5]), _logp(rt, "rr" + rest[:5])]
    assert got == pytest.approx(want, rel=1e-6)
    full = score_texts(rt, [1, 2, 3], texts)  # type: ignore[arg-type]
    assert full == pytest.approx([_logp(rt, t[2:]) for t in texts], rel=1e-6)
    # A reading that is another's head: the rejoined tail never reaches into the shared head.
    assert score_texts(rt, [1], ["ab", "abzz"], tail=1) == pytest.approx(  # type: ignore[arg-type]
        [_logp(rt, ""), _logp(rt, "zz")], rel=1e-6
    )


class NextByteModel(ByteModel):
    """Logits that depend on the token fed: the byte after it is liked."""

    fed = 0

    def eval(self, tokens: Sequence[int], rows: Sequence[int] | None = None) -> np.ndarray:
        self.evals += 1
        self.fed += len(tokens)
        self.tokens += list(tokens)
        out = np.zeros((len(rows or []), self.n_vocab), dtype=np.float32)
        for k, r in enumerate(rows or []):
            out[k, (tokens[r] + 1) % 256] = 3.0
        return out


def _next_logp(prompt_last: int, text: str, start: int, stop: int) -> float:
    seq = [prompt_last, *text.encode()]
    logz = np.log(np.exp(3.0) + 255)
    return float(
        sum((3.0 if seq[j + 1] == (seq[j] + 1) % 256 else 0.0) - logz for j in range(start, stop))
    )


def test_sorted_scoring_reuses_heads_and_scores_the_direct_sum() -> None:
    rest = "mnopq" * 20
    texts = ["xxcdz" + rest, "xxbcd" + rest, "xxcde" + rest, "xxb" + rest]
    rt = NextByteModel(0)
    got = score_texts(rt, [1, 2, 3], texts, tail=4)  # type: ignore[arg-type]
    want = [_next_logp(3, t, 2, len(t) - len(rest) + 4) for t in texts]
    assert got == pytest.approx(want, rel=1e-6)
    # Each text scored from where it parts from the one before: "xxb.." pays for "xxbcd..",
    # "xxcde.." for "xxcdz..", so fewer tokens are fed than the scored spans hold.
    spans = sum(len(t) - len(rest) + 4 - 2 for t in texts)
    assert rt.fed - 4 < spans  # the prompt and shared head ("xx" less its last) fed once


ORIG = """import os


def load(path):
    return open(path).read()


def save(path, data):
    open(path, "w").write(data)
"""
# The new function after the marker: is it inserted, or does it replace `save`?
SNIPPET = """# ... existing code ...
def load(path):
    return open(path).read()


def size(path):
    return os.path.getsize(path)
"""


def test_the_readings_the_check_allows_include_the_insertion_and_the_replacement() -> None:
    merge = structural_merge(ORIG, SNIPPET, "python", "x.py")
    assert not merge.exact
    choices = allowed(ORIG, SNIPPET, merge, ApplySettings())
    assert choices is not None and len(choices) == 1
    texts = {chosen_text(ORIG, merge, [HunkChoice(c.hunk, (e,))]) for c in choices for e in c.edits}
    inserted = ORIG.replace(
        "\n\ndef save", "\n\ndef size(path):\n    return os.path.getsize(path)\n\n\ndef save"
    )
    replaced = (
        ORIG[: ORIG.index("def save")] + "def size(path):\n    return os.path.getsize(path)\n"
    )
    # No reading drops the code under the marker or a snippet line: those the check refuses.
    assert texts == {inserted, replaced}


def test_the_winner_is_the_best_scored_and_the_margin_its_lead() -> None:
    merge = structural_merge(ORIG, SNIPPET, "python", "x.py")
    alts = alternative_edits(merge, 0, ORIG.splitlines(), 2)
    assert alts[0] == merge.edits[0]  # the merge's own placement comes first
    c = HunkChoice(0, tuple(alts[:3]), (-5.0, -1.0, -4.0))
    assert c.winner == alts[1] and c.margin == pytest.approx(3.0)


def test_a_paragraph_rewritten_under_weak_context_is_read_as_replaced() -> None:
    # The merge takes the weak lines above the new paragraph for new lines and inserts it
    # all before the context below; keeping them and replacing the old paragraph moves the
    # span's start over them and four more lines: a short move.
    original = (
        "# Guide\n\n```rust\nfn main() {\n    run();\n}\n```\n\n"
        "Old words on how the tool\nprints its traces, over\nfour lines of the\nold text:\n\n"
        "- set `TRACE=1`;\n- or not.\n\n```rust\nfn other() {\n}\n```\n"
    )
    snippet = (
        "<!-- ... existing code ... -->\n}\n```\n\nNew words on how the tool prints\n"
        "its traces, now over five\nlines, since the text\nhas grown a\nlittle:\n\n"
        "- set `TRACE=1`;\n<!-- ... existing code ... -->\n"
    )
    old = "Old words on how the tool\nprints its traces, over\nfour lines of the\nold text:\n"
    new = snippet.split("```\n\n", 1)[1].split("\n\n- set", 1)[0] + "\n"
    expected = original.replace(old, new)
    merge = structural_merge(original, snippet, "markdown", "GUIDE.md")
    lines = original.splitlines()
    texts = {
        chosen_text(original, merge, [HunkChoice(0, (e,))])
        for e in alternative_edits(merge, 0, lines, ApplySettings().choose_reach)
    }
    assert expected in texts


@pytest.mark.real
def test_a_real_target_chooses_or_leaves_it_to_the_model(smollm2_rt) -> None:  # noqa: ANN001
    merge = structural_merge(ORIG, SNIPPET, "python", "x.py")
    choices = allowed(ORIG, SNIPPET, merge, ApplySettings())
    assert choices is not None
    readings = {
        chosen_text(ORIG, merge, [HunkChoice(c.hunk, (e,))]) for c in choices for e in c.edits
    }
    res = Engine(smollm2_rt).apply(ORIG, SNIPPET, path="x.py", max_tokens=200)
    if res.engine == "choice":
        assert res.text in readings and res.choice[0]["candidates"] == len(readings)
        assert res.choice[0]["margin"] >= ApplySettings().choose_margin
    else:  # no clear winner: the model wrote it, and the check judged it as always
        assert res.engine in ("region", "model")


def test_a_hunk_whose_context_fits_elsewhere_is_read_at_each_place() -> None:
    # Two overloads end with the same parameter lines: the snippet's context fits both, and the
    # merge takes the first. The second place is a reading too, so the target can choose it.
    original = (
        "class Source {\n"
        "    fun fromStream(\n"
        "        stream: InputStream,\n"
        "        requireValid: Boolean = false,\n"
        "    ): Source {\n"
        "        val p = load(stream)\n"
        "        return from(p)\n"
        "    }\n"
        "\n"
        "    fun fromFile(\n"
        "        file: File,\n"
        "        requireValid: Boolean = false,\n"
        "    ): Source {\n"
        "        val p = Properties()\n"
        "        p.load(file)\n"
        "        return from(p)\n"
        "    }\n"
        "}\n"
    )
    snippet = (
        "// ... existing code ...\n"
        "        requireValid: Boolean = false,\n"
        "    ): Source {\n"
        "        return from(file.toPath(), requireValid)\n"
        "    }\n"
        "// ... existing code ...\n"
    )
    merge = structural_merge(original, snippet, "kotlin")
    assert not merge.exact
    choices = allowed(original, snippet, merge, ApplySettings())
    assert choices is not None
    starts = {e.start for c in choices for e in c.edits}
    assert {3, 11} <= starts, starts


def test_a_snippet_that_may_be_the_whole_file_is_also_read_to_the_file_end() -> None:
    original = (
        "package a\n\ntype T struct {\n\tX int\n}\n\nvar r = 1\n\nfunc init() {\n\tr = 2\n}\n"
    )
    snippet = "package a\n\ntype T struct {\n\tX int\n}\n\nfunc New() *T {\n\treturn &T{}\n}\n"
    merge = structural_merge(original, snippet, "go")
    assert not merge.exact
    edits = allowed(original, snippet, merge, ApplySettings())
    assert edits is not None
    ends = {e.end for c in edits for e in c.edits}
    assert 11 in ends, ends  # everything after the struct deleted: the whole new file


@pytest.mark.parametrize(("lead", "warned"), [(8.0, True), (40.0, False)])
def test_a_choice_by_a_narrow_lead_is_written_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, lead: float, warned: bool
) -> None:
    # Clear enough to answer, not enough to pass as sure: the user is told where to look.
    merge = structural_merge(ORIG, SNIPPET, "python", "x.py")
    choices = allowed(ORIG, SNIPPET, merge, ApplySettings())
    assert choices and all(len(c.edits) > 1 for c in choices)
    scored = [HunkChoice(c.hunk, c.edits, (lead,) + (0.0,) * (len(c.edits) - 1)) for c in choices]
    monkeypatch.setattr("edge_spec.engine.choose", lambda *a, **k: scored)
    res = Engine(FakeRuntime()).apply(ORIG, SNIPPET, path="x.py")
    assert res.engine == "choice" and all(c["chosen"] for c in res.choice)
    narrow = [w for w in res.warnings if "narrow lead" in w]
    assert bool(narrow) == warned
    if warned:
        assert narrow[0].startswith(f"hunk {choices[0].hunk + 1} went to original lines")


def test_a_choice_without_a_clear_lead_is_recorded_beside_the_models_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The model writes the file; what the choice found, and what it cost, stays in the result.
    merge = structural_merge(ORIG, SNIPPET, "python", "x.py")
    choices = allowed(ORIG, SNIPPET, merge, ApplySettings())
    assert choices
    scored = [HunkChoice(c.hunk, c.edits, (1.0,) + (0.0,) * (len(c.edits) - 1)) for c in choices]
    monkeypatch.setattr("edge_spec.engine.choose", lambda *a, **k: scored)
    res = Engine(FakeRuntime(follow=ORIG)).apply(ORIG, SNIPPET, path="x.py", max_tokens=64)
    assert res.engine in ("region", "model")
    assert [c["chosen"] for c in res.choice] == [False] * len(choices)
    assert all(c["margin"] == 1.0 and c["ms"] >= 0 for c in res.choice)
    assert res.to_dict()["choice"] == res.choice


def test_loses_definitions_counts_renames_as_kept() -> None:
    before = definitions("python", parse("python", ORIG.encode()))
    renamed = ORIG.replace("def save", "def store")
    gone = ORIG[: ORIG.index("def save")]
    for text, named, loses in (
        (renamed, SNIPPET, False),  # `store` stands where `save` was
        (gone, SNIPPET, True),  # `save` deleted, nothing new in its place
        (gone, SNIPPET + "# save goes\n", False),  # the snippet names it
    ):
        after = definitions("python", parse("python", text.encode()))
        assert loses_definitions(before, after, named) is loses


@pytest.mark.parametrize(
    ("name", "task_id"),
    [
        ("code_apply_mined3.jsonl", "cjson-983a4cd-0"),
        ("code_apply_mined3.jsonl", "restsharp-18c057b-0"),
        ("code_apply_mined3.jsonl", "logrus-52039d6-0"),
    ],
)
def test_readings_that_delete_an_unnamed_definition_are_left_out(name: str, task_id: str) -> None:
    # Each of these hunks also fits with a whole definition the snippet never names deleted;
    # those readings would be written with a warning at best, while the right one keeps it.
    task = dev_task(name, task_id)
    original, update = task["original"], task["update"]
    merge = structural_merge(original, update, task["language"], task["path"])
    before = definitions(merge.language, parse(merge.language, original.encode()))
    texts = []
    for h in merge.hunks:
        if h.status == "exact":
            continue
        for e in readings(original, update, merge, h.index, ApplySettings().choose_reach):
            text = chosen_text(original, merge, [HunkChoice(h.index, (e,))])
            after = definitions(merge.language, parse(merge.language, text.encode()))
            assert not loses_definitions(before, after, update)
            texts.append(text)
    assert task["expected"] in texts

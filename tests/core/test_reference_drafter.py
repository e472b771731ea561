"""Reference drafter: alignment, re-sync after an edit, text fallback, per-step cost."""

from __future__ import annotations

import statistics
import time

import pytest

from edge_spec.drafters.reference import ReferenceDrafter
from edge_spec.errors import UserError
from edge_spec.runtimes.fake import FakeRuntime

FILE = "".join(
    f"def handler_{i}(request):\n    return respond(request, code={i})\n\n" for i in range(120)
)


def test_copy_continues_the_alignment_and_resyncs_after_an_edit() -> None:
    rt = FakeRuntime()
    d = ReferenceDrafter(rt)
    prompt = rt.tokenize("Rewrite this:\n")
    d.begin(prompt, [FILE])
    out = rt.tokenize(FILE[:40])
    draft = d.propose(prompt + out, 16)
    assert rt.detokenize(draft.tokens) == FILE[40:56]
    d.observe(draft, 16)
    ctx = prompt + out + draft.tokens + rt.tokenize(FILE[56])
    nxt = d.propose(ctx, 8)
    assert nxt.feature.startswith("ref-a") and rt.detokenize(nxt.tokens) == FILE[57:65]
    # An edit: the output departs from the reference, then matches it again.
    edited = prompt + rt.tokenize(FILE[:200] + "    log(request)\n" + FILE[200:230])
    d.observe(nxt, 0)
    again = d.propose(edited, 8)
    assert rt.detokenize(again.tokens) == FILE[230:238]


def test_start_of_answer_proposes_the_first_reference() -> None:
    rt = FakeRuntime()
    d = ReferenceDrafter(rt)
    prompt = rt.tokenize("Q")
    d.begin(prompt, [FILE])
    draft = d.propose(prompt, 10)
    assert draft.feature == "ref-start" and rt.detokenize(draft.tokens) == FILE[:10]


def test_a_free_prompt_drafts_learn_apart_from_an_apply() -> None:
    rt = FakeRuntime()
    prompt = rt.tokenize("Repeat this code:\n" + FILE[:400] + "\nAnswer:\n")
    free, applied = ReferenceDrafter(rt), ReferenceDrafter(rt)
    free.begin(prompt, [])
    applied.begin(prompt, [FILE[:400]])
    ctx = prompt + rt.tokenize(FILE[:40])
    a, b = free.propose(ctx, 8), applied.propose(ctx, 8)
    assert a.tokens and a.feature.startswith("ref-f-n-")
    assert b.tokens and b.feature.startswith("ref-n-")


def test_reference_longer_than_context_is_refused() -> None:
    rt = FakeRuntime(n_ctx=256)
    d = ReferenceDrafter(rt)
    d.cfg = type(d.cfg)(max_reference_tokens=100)
    with pytest.raises(UserError, match="longer than the context"):
        d.begin([1, 2, 3], ["x" * 1000])


def test_step_cost_on_a_5000_token_reference(capsys) -> None:  # noqa: ANN001
    rt = FakeRuntime(n_ctx=100_000)
    text = FILE * 2
    d = ReferenceDrafter(rt)
    prompt = rt.tokenize("Apply:\n" + text[:5000] + "\nAnswer:\n")
    d.begin(prompt, [text[:5000]])
    times, right = [], 0
    for i in range(0, 4000, 37):
        ctx = prompt + rt.tokenize(text[: i + 50])
        t0 = time.perf_counter()
        draft = d.propose(ctx, 32)
        times.append((time.perf_counter() - t0) * 1e3)
        assert len(draft) <= 32  # bounded by what was asked, however long the reference
        right += rt.detokenize(draft.tokens) == text[i + 50 : i + 50 + len(draft)]
    # Inside a copied stretch, the draft is the reference's continuation (the file repeats, so
    # the second copy's alignment must be kept, not jump to the first occurrence).
    assert right >= 0.95 * len(times)
    with capsys.disabled():
        print(
            f"\n[reference drafter] 5000-token reference: median {statistics.median(times):.3f} ms"
            f", max {max(times):.3f} ms per propose()"
        )


@pytest.mark.real
def test_token_boundaries_fall_back_to_text(smollm2_rt) -> None:  # noqa: ANN001
    rt = smollm2_rt
    ref = "    result = compute_total(items, discount=0.15)\n    return result\n"
    # Tokenized on its own, the reference starts with different tokens than in the output,
    # where the same text follows other characters.
    out_text = "x = 1\n" + ref[:30]
    alone, in_ctx = rt.tokenize(ref), rt.tokenize(out_text)
    bigrams = {tuple(alone[i : i + 2]) for i in range(len(alone) - 1)}
    assert tuple(in_ctx[-2:]) not in bigrams  # token n-gram matching alone finds nothing here
    d = ReferenceDrafter(rt)
    prompt = rt.tokenize("Q:")
    d.begin(prompt, [ref])
    draft = d.propose(prompt + in_ctx, 8)
    assert draft.tokens, "no draft although the output text is in the reference"
    assert ref[30:].startswith(rt.detokenize(draft.tokens)[:5])


def test_drafts_end_at_edit_cuts() -> None:
    from edge_spec.apply import edit_references

    rt = FakeRuntime()
    original = "a = 1\nb = 2\nc = 3\nd = 4\n"
    merged, _ = edit_references(
        original, "# ... existing code ...\nc = 30\n# ... existing code ...\n"
    )
    assert merged.text == "a = 1\nb = 2\nc = 30\nd = 4\n" and merged.cuts == (12, 19)
    d = ReferenceDrafter(rt)
    prompt = rt.tokenize("Q")
    d.begin(prompt, [merged])
    first = d.propose(prompt, 64)
    assert rt.detokenize(first.tokens) == "a = 1\nb = 2\n"  # stops where the edit begins
    d.observe(first, len(first))
    ctx = prompt + first.tokens + rt.tokenize("c")
    second = d.propose(ctx, 64)
    assert rt.detokenize(second.tokens) == " = 30\n"

"""The llama.cpp runtime on a real model (SmolLM2-135M)."""

from __future__ import annotations

import numpy as np
import pytest

from edge_spec.runtimes.base import host_greedy

pytestmark = pytest.mark.real

CODE = "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n"


def test_batch_vs_single_and_truncate(smollm2_rt, capsys) -> None:  # noqa: ANN001
    rt = smollm2_rt
    toks = rt.tokenize(CODE)
    rt.truncate(0)
    full = rt.eval(toks, rows=range(len(toks))).copy()
    assert full.shape == (len(toks), rt.n_vocab)
    rt.truncate(0)
    single = np.stack([rt.eval([t])[0].copy() for t in toks])
    diff = float(np.abs(full - single).max())
    # Batched and one-token evaluation may pick different tokens only where the top two are
    # closer than the difference between the two evaluations (docs/design.md, "Lossless").
    for i in np.flatnonzero(full.argmax(1) != single.argmax(1)):
        top = np.sort(single[i])[-2:]
        assert top[1] - top[0] <= diff, (int(i), float(top[1] - top[0]), diff)
    rt.truncate(5)
    assert rt.n_tokens == 5 and rt.tokens == toks[:5]
    again = rt.eval(toks[5:], rows=range(len(toks) - 5))
    trunc_diff = float(np.abs(again - full[5:]).max())
    with capsys.disabled():
        print(
            f"\n[llamacpp smollm2] batch-vs-single max |dlogit| {diff:.4f}; "
            f"truncate+re-eval max |dlogit| {trunc_diff:.4f}"
        )
    assert trunc_diff < 1e-3 or (again.argmax(1) == full[5:].argmax(1)).all()


def test_rows_requested_are_rows_returned(smollm2_rt) -> None:  # noqa: ANN001
    rt = smollm2_rt
    toks = rt.tokenize(CODE)
    rt.truncate(0)
    assert rt.eval(toks[:10], rows=[]).shape == (0, rt.n_vocab)
    assert rt.eval(toks[10:20], rows=[0, 3, 9]).shape == (3, rt.n_vocab)
    assert rt.eval(toks[20:25]).shape == (1, rt.n_vocab)
    assert rt.n_tokens == 25


def test_vocab_and_detokenize(smollm2_rt) -> None:  # noqa: ANN001
    rt = smollm2_rt
    v = rt.vocab
    assert v.size == rt.n_vocab == 49152 and v.eos_id is not None and len(v.fingerprint) == 16
    toks = rt.tokenize("héllo wörld 🙂")
    assert rt.detokenize(toks) == "héllo wörld 🙂"
    assert b"".join(rt.token_bytes(t) for t in toks).decode() == "héllo wörld 🙂"
    assert rt.is_eog(v.eos_id)


def test_context_overflow_is_a_user_error(smollm2_path) -> None:  # noqa: ANN001
    from edge_spec.errors import UserError
    from edge_spec.runtimes.base import RuntimeOptions
    from edge_spec.runtimes.llamacpp import LlamaCppRuntime

    rt = LlamaCppRuntime(smollm2_path, RuntimeOptions(n_ctx=64, threads=2))
    with pytest.raises(UserError, match="context"):
        rt.eval(list(range(100, 110 + rt.n_ctx)))


def test_mapped_and_read_weights_give_the_same_logits(smollm2_path) -> None:  # noqa: ANN001
    from edge_spec.runtimes.base import RuntimeOptions
    from edge_spec.runtimes.llamacpp import LlamaCppRuntime

    out = []
    for mmap in (False, True):
        rt = LlamaCppRuntime(smollm2_path, RuntimeOptions(n_ctx=256, threads=1, mmap=mmap))
        toks = rt.tokenize(CODE)
        out.append(rt.eval(toks, rows=range(len(toks))).copy())
        del rt
    np.testing.assert_array_equal(out[0], out[1])


def test_a_long_verify_walks_its_rows_on_two_threads_as_on_one(smollm2_rt) -> None:  # noqa: ANN001
    rt = smollm2_rt
    toks = rt.tokenize(CODE * 8)  # repeated text: the model's argmax follows it for long runs
    start = len(toks) - 97
    assert rt._argmax.takes(97)
    for draft_end in (len(toks), start + 40):
        tokens = toks[start:draft_end] + ([] if draft_end == len(toks) else [0] * 56)
        rt.truncate(0)
        rt.eval(toks[:start], rows=[])
        rows = rt.eval(tokens, rows=range(len(tokens))).copy()
        rt.truncate(start)
        assert rt.greedy(tokens) == host_greedy(rows, tokens[1:])  # the pooled walk
        assert len(host_greedy(rows, tokens[1:])) > 16  # it went past the first block


@pytest.mark.parametrize("first", ["same", "longer", "other tail"])
def test_cached_prefix_gives_the_fresh_answer(smollm2_path, first: str) -> None:  # noqa: ANN001
    """A greedy answer is the same bytes whether its prompt's head came from the KV cache (left
    by a request with the same, a longer or another tail) or was evaluated afresh."""
    from edge_spec.core.controller import Controller
    from edge_spec.core.loop import GenConfig, generate
    from edge_spec.runtimes.base import RuntimeOptions
    from edge_spec.runtimes.llamacpp import LlamaCppRuntime

    opts = RuntimeOptions(n_ctx=512, n_batch=16, threads=2)
    head = "def merge(a, b):\n    out = []\n    i = j = 0\n    while i < len(a) and j < len(b):\n"
    prompt = head + "        if a[i] <= b[j]:\n"
    earlier = {"same": prompt, "longer": prompt + "            out.append(a[i])\n"}
    earlier["other tail"] = head + "        pass\n"
    warm, fresh = LlamaCppRuntime(smollm2_path, opts), LlamaCppRuntime(smollm2_path, opts)
    ids = warm.tokenize(prompt)
    generate(warm, warm.tokenize(earlier[first]), [], Controller(), GenConfig(max_tokens=24))
    cached = generate(warm, ids, [], Controller(), GenConfig(max_tokens=24))
    want = generate(fresh, ids, [], Controller(), GenConfig(max_tokens=24))
    if first == "same":  # the very prompt the cache holds, evaluated in a fresh one's shapes
        assert cached.stats.cached_tokens == len(ids) - 1
    else:  # a shared head: reused in whole n_batch chunks
        assert cached.stats.cached_tokens > 0 and cached.stats.cached_tokens % opts.n_batch == 0
    assert cached.text.encode() == want.text.encode() and cached.tokens == want.tokens

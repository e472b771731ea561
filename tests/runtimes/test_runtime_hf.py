"""The torch runtime on SmolLM2-135M: the numeric reference, exact greedy losslessness."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import load_tasks

from edge_spec.errors import UserError
from edge_spec.runtimes.base import Only, RuntimeOptions, host_greedy

pytestmark = pytest.mark.real
pytest.importorskip("torch")
pytest.importorskip("transformers")

CODE = "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n"
OPTS = RuntimeOptions(n_ctx=4096, threads=1)


@pytest.fixture(scope="module")
def hf_rt(smollm2_hf_dir: Path):  # noqa: ANN201
    from edge_spec.runtimes.hf import TorchRuntime

    return TorchRuntime(smollm2_hf_dir, OPTS)


def test_batch_vs_single_and_truncate(hf_rt, capsys) -> None:  # noqa: ANN001
    rt = hf_rt
    toks = rt.tokenize(CODE)
    rt.truncate(0)
    full = rt.eval(toks, rows=range(len(toks))).copy()
    assert full.shape == (len(toks), rt.n_vocab) and full.dtype == np.float32
    rt.truncate(0)
    single = np.stack([rt.eval([t])[0].copy() for t in toks])
    assert (full.argmax(1) == single.argmax(1)).all()
    diff = float(np.abs(full - single).max())
    rt.truncate(5)
    assert rt.n_tokens == 5 and rt.tokens == toks[:5]
    again = rt.eval(toks[5:], rows=range(len(toks) - 5))
    with capsys.disabled():
        print(
            f"\n[torch smollm2] batch-invariant kernels: {rt.batch_invariant}; batch-vs-single "
            f"max |dlogit| {diff:.2e}; truncate+re-eval max |dlogit| "
            f"{float(np.abs(again - full[5:]).max()):.2e}"
        )
    assert np.array_equal(again, full[5:])
    if rt.batch_invariant:
        assert diff == 0.0  # bit for bit: what exact greedy losslessness rests on


def test_rows_requested_are_rows_returned(hf_rt) -> None:  # noqa: ANN001
    rt = hf_rt
    toks = rt.tokenize(CODE)
    rt.truncate(0)
    assert rt.eval(toks[:10], rows=[]).shape == (0, rt.n_vocab)
    assert rt.eval(toks[10:20], rows=[0, 3, 9]).shape == (3, rt.n_vocab)
    assert rt.eval(toks[20:25]).shape == (1, rt.n_vocab)
    assert rt.n_tokens == 25
    rt.truncate(0)
    assert rt.n_tokens == 0 and rt.eval(toks[:3]).shape == (1, rt.n_vocab)
    with pytest.raises(UserError, match="context"):
        rt.eval([toks[0]] * rt.n_ctx)


def test_vocab_matches_llamacpp(hf_rt, smollm2_rt) -> None:  # noqa: ANN001
    from edge_spec.core.chat import chat_tokens
    from edge_spec.core.pairing import pair_problem

    rt, lc = hf_rt, smollm2_rt
    a, b = rt.vocab, lc.vocab
    assert (a.size, a.vocab_type, a.bos_id, a.eos_id) == (b.size, b.vocab_type, b.bos_id, b.eos_id)
    assert a.fingerprint == b.fingerprint and a.eog_ids == b.eog_ids
    assert pair_problem(a, b) is None and pair_problem(a, a) is None
    assert all(rt.token_bytes(t) == lc.token_bytes(t) for t in range(0, rt.n_vocab, 7))
    for text in ("héllo wörld 🙂\n\tx = 1", "a  b   c\n\n\nd", "<|im_start|>user\nhi<|im_end|>"):
        for special in (True, False):
            assert rt.tokenize(text, special=special) == lc.tokenize(text, special=special)
    toks = rt.tokenize("héllo wörld 🙂")
    assert rt.detokenize(toks) == "héllo wörld 🙂"
    msgs = [{"role": "user", "content": "Write a haiku"}]
    assert chat_tokens(rt, msgs) == chat_tokens(lc, msgs)
    assert rt.is_eog(a.eos_id) and not rt.is_eog(toks[0])


def test_greedy_spec_equals_plain_exactly(hf_rt, capsys) -> None:  # noqa: ANN001
    from edge_spec.engine import Engine, EngineConfig

    engine = Engine(hf_rt, None, EngineConfig().override(kind="reference"))
    task = load_tasks(n=2)[1]  # the smallest task whose answer is not a few tokens
    report = []
    plain = None
    for draft, k in (("none", None), ("reference", None), ("reference", 8)):
        res = engine.apply(
            task["original"],
            task["update"],
            task["instruction"],
            draft=draft,
            max_tokens=64,
            fixed_k=k,
            engine="model",
        )
        s = res.stats
        report.append(
            f"{task['id']} {draft:<9} k={k or 'auto':<4} out {s.output_tokens} "
            f"forwards {s.target_forwards} accepted {s.accepted}/{s.drafted} "
            f"decode {s.output_tokens / (s.decode_ms / 1e3):.2f} tok/s"
        )
        if plain is None:
            plain = res.extra["tokens"]
            assert len(plain) > 16
        else:
            assert res.extra["tokens"] == plain, report[-1]
    with capsys.disabled():
        print("\n" + "\n".join(report))


def test_device_masks_match_the_host(hf_rt) -> None:  # noqa: ANN001
    # Row masks on the device (a ban list, an allow-list) pick what the host argmax picks.
    prompt = hf_rt.tokenize(CODE[:40], add_bos=True)
    hf_rt.truncate(0)
    hf_rt.eval(prompt[:-1], rows=[])
    tokens = [prompt[-1], *hf_rt.tokenize(CODE[40:60], special=False)]
    logits = hf_rt.eval(tokens, rows=range(len(tokens))).copy()
    order = np.argsort(logits, axis=1)
    masks = [Only(np.sort(order[0, -6:-1]).astype(np.int64)), order[1, -1:].astype(np.int64)]
    masks += [np.zeros(0, dtype=np.int64)] * (len(tokens) - 2)
    drafts = ([int(order[0, -2])], [int(order[0, -3]), int(order[1, -1])])
    for draft in drafts:
        hf_rt.truncate(len(prompt) - 1)
        rows = hf_rt.eval([tokens[0], *draft], rows=range(len(draft) + 1)).copy()
        want = host_greedy(rows, draft, masks[: len(draft) + 1])
        hf_rt.truncate(len(prompt) - 1)
        got = hf_rt.greedy([tokens[0], *draft], masks[: len(draft) + 1])
        assert got == want and got[0] == int(order[0, -2]), (got, want)


def test_torch_vs_llamacpp_argmax(hf_rt, smollm2_rt, capsys) -> None:  # noqa: ANN001
    from edge_spec.core.chat import chat_tokens

    toks = chat_tokens(hf_rt, [{"role": "user", "content": "Explain this code:\n" + CODE}])
    rows = range(len(toks))
    for rt in (hf_rt, smollm2_rt):
        rt.truncate(0)
    a = hf_rt.eval(toks, rows=rows).copy()
    b = smollm2_rt.eval(toks, rows=rows).copy()
    agree = float((a.argmax(1) == b.argmax(1)).mean())
    with capsys.disabled():
        print(
            f"\n[torch fp32 vs llama.cpp Q4_1] argmax agreement {agree:.2f} over {len(toks)} "
            f"positions, max |dlogit| {float(np.abs(a - b).max()):.2f}"
        )
    # The GGUF is Q4_1 and llama.cpp quantizes activations: only a loose bound.
    assert agree >= 0.6


def test_cli_run_torch(smollm2_hf_dir: Path) -> None:
    from edge_spec.cli.main import main

    t0 = time.perf_counter()
    res = CliRunner().invoke(
        main,
        [
            "run",
            "--runtime",
            "torch",
            "--model",
            str(smollm2_hf_dir),
            "--prompt",
            "Say hi",
            "--max-tokens",
            "8",
            "--threads",
            "1",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert '"output_tokens": 8' in res.stdout and time.perf_counter() - t0 < 60


def test_pickle_checkpoint_refused(tmp_path: Path) -> None:
    from edge_spec.runtimes.hf import TorchRuntime

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04")
    with pytest.raises(UserError, match="safetensors"):
        TorchRuntime(tmp_path, OPTS)

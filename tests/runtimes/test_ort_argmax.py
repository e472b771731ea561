"""`OrtRuntime.greedy` through the graph's own argmax output (`edge_spec.runtimes.ort_graph`).

The claim: the ids read from `edge_spec_argmax`, banned ids masked in the graph, equal numpy's
argmax of the logits `eval` returns (`host_greedy`), ties included. Checked on CPU on a tiny
synthetic optimum-layout decoder (integer weights: exact sums, so ties are frequent and chunking
changes nothing), and on SmolLM2 exported by the builder (shared KV buffers, IO binding).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
tokenizers = pytest.importorskip("tokenizers")

from edge_spec.runtimes import ort_session  # noqa: E402
from edge_spec.runtimes.base import Only, RowBan, RuntimeOptions, host_greedy  # noqa: E402
from edge_spec.runtimes.ort import OrtRuntime  # noqa: E402
from edge_spec.runtimes.ort_graph import ARGMAX  # noqa: E402

VOCAB, DIM, CTX = 16, 8, 64
TIE = (3, 7)  # lm_head columns 3 and 7 are equal: those logits always tie
OPTS = RuntimeOptions(n_ctx=CTX, threads=1)


def _weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    emb = rng.integers(-2, 3, (VOCAB, DIM)).astype(np.float32)
    pos = rng.integers(-1, 2, (CTX, DIM)).astype(np.float32)
    emb[0] = -pos[0]  # token 0 at position 0: hidden state 0, all logits 0 (an all-way tie)
    head = rng.integers(-2, 3, (DIM, VOCAB)).astype(np.float32)
    head[:, TIE[1]] = head[:, TIE[0]]
    bias = rng.integers(-1, 2, VOCAB).astype(np.float32)
    bias[TIE[1]] = bias[TIE[0]]
    return {"emb": emb, "pos": pos, "head": head, "bias": bias}


def _graph(variant: str) -> onnx.ModelProto:
    """Optimum layout: logits row i = (sum of emb+pos over positions <= i) @ head [+ bias].

    The sum runs over present.0.value (past + this chunk), so a wrong past shows in the logits.
    """
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    w = _weights()
    inits = [numpy_helper.from_array(v, k) for k, v in w.items()]
    inits += [
        numpy_helper.from_array(np.array(v, np.int64), k)
        for k, v in (("one", [1]), ("two", 2), ("squeeze", [1, 2]))
    ]
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["e"]),
        helper.make_node("Gather", ["pos", "position_ids"], ["p"]),
        helper.make_node("Add", ["e", "p"], ["x"]),
        helper.make_node("Unsqueeze", ["x", "one"], ["kv"]),  # [1, 1, s, D]
        helper.make_node("Concat", ["past_key_values.0.key", "kv"], ["present.0.key"], axis=2),
        helper.make_node("Concat", ["past_key_values.0.value", "kv"], ["present.0.value"], axis=2),
        helper.make_node("CumSum", ["present.0.value", "two"], ["c"]),
        helper.make_node("Gather", ["c", "position_ids"], ["g"], axis=2),  # [1, 1, 1, s, D]
        helper.make_node("Squeeze", ["g", "squeeze"], ["h"]),
    ]
    if variant == "matmul":  # lm_head MatMul makes logits: the rows edit applies too
        nodes.append(helper.make_node("MatMul", ["h", "head"], ["logits"]))
    else:
        nodes.append(helper.make_node("MatMul", ["h", "head"], ["z"]))
        if variant == "bias":
            nodes.append(helper.make_node("Add", ["z", "bias"], ["logits"]))
        else:  # fp16 logits
            nodes.append(helper.make_node("Cast", ["z"], ["logits"], to=T.FLOAT16))
    kv = [1, 1, "past", DIM]
    ins = [
        helper.make_tensor_value_info("input_ids", T.INT64, [1, "s"]),
        helper.make_tensor_value_info("attention_mask", T.INT64, [1, "t"]),
        helper.make_tensor_value_info("position_ids", T.INT64, [1, "s"]),
        helper.make_tensor_value_info("past_key_values.0.key", T.FLOAT, kv),
        helper.make_tensor_value_info("past_key_values.0.value", T.FLOAT, kv),
    ]
    dtype = T.FLOAT16 if variant == "fp16" else T.FLOAT
    outs = [
        helper.make_tensor_value_info("logits", dtype, [1, "s", VOCAB]),
        helper.make_tensor_value_info("present.0.key", T.FLOAT, [1, 1, "t", DIM]),
        helper.make_tensor_value_info("present.0.value", T.FLOAT, [1, 1, "t", DIM]),
    ]
    graph = helper.make_graph(nodes, "tiny", ins, outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def _folder(root: Path, variant: str) -> Path:
    d = root / f"tiny-{variant}"
    d.mkdir()
    onnx.save(_graph(variant), str(d / "model.onnx"))
    cfg = {
        "vocab_size": VOCAB,
        "max_position_embeddings": CTX,
        "num_attention_heads": 1,
        "hidden_size": DIM,
        "num_key_value_heads": 1,
    }
    (d / "config.json").write_text(json.dumps(cfg))
    words = {f"t{i}": i for i in range(VOCAB)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(words, unk_token="t0"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tok.save(str(d / "tokenizer.json"))
    return d


@pytest.fixture(scope="module", params=["matmul", "bias", "fp16"])
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _folder(tmp_path_factory.mktemp("ort-argmax"), request.param)


def _reference(
    rt: OrtRuntime, prefix: list[int], tokens: list[int], banned: list[RowBan] | None
) -> list[int]:
    """host_greedy on `eval`'s logits, with the cache left at `prefix` afterwards."""
    rt.truncate(len(prefix))
    want = host_greedy(rt.eval(tokens, rows=range(len(tokens))).copy(), tokens[1:], banned)
    rt.truncate(len(prefix))
    return want


def _plain(rt: OrtRuntime, prompt: list[int], n: int) -> list[int]:
    """n tokens of plain greedy decoding after `prompt`, whose last token is not cached yet."""
    out = [prompt[-1]]
    for _ in range(n):
        out.append(int(rt.eval([out[-1]])[0].argmax()))
    rt.truncate(len(prompt) - 1)
    return out[1:]


def _bans(rng: np.random.Generator, rows: int, vocab: int, best: list[int]) -> list[RowBan]:
    """Random bans, often the row's own argmax (so the mask matters), with repeats and int32."""
    out = []
    for i in range(rows):
        ids = rng.integers(0, vocab, rng.integers(0, 4)).tolist()
        if i < len(best) and rng.random() < 0.5:
            ids += [best[i], best[i]]
        if rng.random() < 0.2:  # an allow-list (the lines guard's): the graph's ban list cannot
            out.append(Only(np.unique(np.asarray(ids + [0], dtype=np.int64))))  # take it
            continue
        out.append(np.asarray(ids, dtype=np.int32 if i % 2 else np.int64))
    return out


def _check_drafts(rt: OrtRuntime, seed: int, trials: int, vocab: int) -> int:
    """greedy == host reference on random prompts and drafts; returns how many ids were checked."""
    rng = np.random.default_rng(seed)
    checked = 0
    for trial in range(trials):
        rt.truncate(0)
        prompt = rng.integers(0, vocab, rng.integers(1, 8)).tolist()
        rt.eval(prompt[:-1], rows=[])
        k = int(rng.integers(0, 9))
        good = _plain(rt, prompt, k)
        cut = int(rng.integers(0, k + 1))  # accept `cut` tokens, then a random one
        draft = good[:cut] + rng.integers(0, vocab, k - cut).tolist()
        tokens = [prompt[-1], *draft]
        banned = _bans(rng, len(tokens), vocab, good) if trial % 2 else None
        want = _reference(rt, prompt[:-1], tokens, banned)
        got = rt.greedy(tokens, banned)
        assert got == want, (trial, tokens, banned)
        assert rt.tokens == prompt[:-1] + tokens  # greedy appends all of them, like eval
        checked += len(got)
    return checked


def test_graph_gets_argmax(tiny: Path) -> None:
    rt = OrtRuntime(tiny, OPTS)
    assert rt._dec.device_argmax and ARGMAX in {o.name for o in rt._dec._s.get_outputs()}
    assert rt._dec._rows == tiny.name.endswith("matmul")  # the two edits compose


def test_greedy_equals_host_argmax(tiny: Path) -> None:
    rt = OrtRuntime(tiny, OPTS)
    assert _check_drafts(rt, seed=1, trials=40, vocab=VOCAB) > 40


def test_ties_go_to_the_first_index(tiny: Path) -> None:
    rt = OrtRuntime(tiny, OPTS)
    rt.truncate(0)
    if not tiny.name.endswith("bias"):  # token 0 first: all logits 0, an all-way tie
        assert not rt.eval([0]).any()
        rt.truncate(0)
        assert rt.greedy([0, 5]) == [0]
        rt.truncate(0)
        assert rt.greedy([0, 5], [np.array([0, 1])]) == [2]
    # Rows whose maximum is reached more than once: the first index wins, and the second when
    # the first is banned.
    rng = np.random.default_rng(3)
    seen = 0
    for _ in range(100):
        toks = rng.integers(0, VOCAB, 4).tolist()
        rt.truncate(0)
        row = rt.eval(toks)[0].copy()
        top = np.flatnonzero(row == row.max())
        if len(top) < 2:
            continue
        seen += 1
        for banned, want in ((None, top[0]), ([np.array([top[0]])], top[1])):
            rt.truncate(3)
            other = (int(want) + 1) % VOCAB
            assert rt.greedy([toks[-1], other], banned) == [want]
            assert host_greedy(row[None], [other], banned) == [want]
    assert seen >= 5, "too few tied rows to test"


def test_fallbacks_give_the_same_ids(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Past n_batch (several forwards per verify) greedy takes the argmax on the host.
    short = OrtRuntime(tiny, RuntimeOptions(n_ctx=CTX, threads=1, n_batch=3))
    assert _check_drafts(short, seed=2, trials=12, vocab=VOCAB)
    edited = OrtRuntime(tiny, OPTS)
    # Without onnx's graph edits (no onnx, or a graph they do not fit): host argmax, same logits.
    monkeypatch.setattr(ort_session, "edited_graph", lambda _file: None)
    plain = OrtRuntime(tiny, OPTS)
    assert not plain._dec.device_argmax and not plain._dec._rows
    assert _check_drafts(plain, seed=1, trials=10, vocab=VOCAB)
    toks = list(range(VOCAB)) * 2
    plain.truncate(0)
    a = edited.eval(toks, rows=range(len(toks))).copy()
    assert np.array_equal(a, plain.eval(toks, rows=range(len(toks))))


# SmolLM2 exported by the builder: GroupQueryAttention, shared KV buffers, IO binding.


@pytest.fixture(scope="module")
def smol_fp32(onnx_dirs: dict[str, Path]) -> Path:
    pytest.importorskip("onnxruntime_genai")
    pytest.importorskip("onnx_ir")
    return onnx_dirs["fp32"]


@pytest.mark.real
def test_builder_graph_greedy(smol_fp32: Path) -> None:
    opts = RuntimeOptions(n_ctx=512, threads=2)
    rt = OrtRuntime(smol_fp32, opts)
    assert rt._dec.device_argmax and rt._dec._rows and rt._dec._shared
    assert _check_drafts(rt, seed=4, trials=4, vocab=rt.n_vocab)
    # The device-logits binding (an OrtValue grown as needed), here on the CPU device.
    rt._dec._logits_on_device = True
    assert _check_drafts(rt, seed=5, trials=4, vocab=rt.n_vocab)
    assert rt._dec._device_logits is not None
    sliced = OrtRuntime(smol_fp32, opts, share_buffer=False)
    assert _check_drafts(sliced, seed=6, trials=3, vocab=rt.n_vocab)


@pytest.mark.real
def test_builder_spec_equals_plain(smol_fp32: Path) -> None:
    from conftest import load_tasks

    from edge_spec.engine import Engine, EngineConfig

    rt = OrtRuntime(smol_fp32, RuntimeOptions(n_ctx=2048, threads=2))
    engine = Engine(rt, None, EngineConfig().override(kind="reference"))
    t = load_tasks(n=2)[1]
    # fixed_k: the adaptive controller's choice of k depends on measured times (a loaded
    # machine may draft nothing).
    runs = [
        engine.apply(
            t["original"],
            t["update"],
            t["instruction"],
            draft=d,
            max_tokens=32,
            engine="model",
            fixed_k=k,
        )
        for d, k in (("none", None), ("reference", 8))
    ]
    assert runs[1].stats.accepted > 0  # the drafts went through greedy, and some were kept
    assert runs[0].extra["tokens"] == runs[1].extra["tokens"]  # fp32: exact, no near-ties

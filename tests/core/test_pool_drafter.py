"""Pool drafter: drafts from earlier outputs, bounded memory, lossless in the loop."""

from __future__ import annotations

import tracemalloc
from collections import Counter

import numpy as np
import pytest
from lossless import assert_same_or_near_tie

from edge_spec.config.settings import EngineConfig, PoolSettings, SamplingSettings
from edge_spec.core.controller import Controller
from edge_spec.core.loop import GenConfig, generate
from edge_spec.core.types import Draft
from edge_spec.drafters.pool import BYTES_PER_TOKEN, OutputPool, PoolDrafter
from edge_spec.engine import Engine
from edge_spec.runtimes.fake import FakeRuntime


def _pool(**kw: object) -> OutputPool:
    return OutputPool(PoolSettings(**kw))  # type: ignore[arg-type]


def test_continues_the_longest_earlier_match_with_its_frequency() -> None:
    pool = _pool(pool_ngram=2)
    pool.add([1, 2, 3, 4, 5, 6])
    pool.add([9, 3, 4, 5, 7])
    pool.add([8, 3, 4, 5, 6])
    d = PoolDrafter(pool)
    d.begin([0], [], np.random.default_rng(0))
    draft = d.propose([0, 3, 4, 5], 8)
    # Three outputs went on after "3 4 5": 6 twice, 7 once.
    assert draft.tokens[0] == 6 and draft.confidence[0] == pytest.approx(2 / 3)
    assert draft.feature == "pool-le4-chat" and draft.source == "pool"
    # A longer match narrows the occurrences to the one that shares it.
    longer = d.propose([1, 2, 3, 4, 5], 8)
    assert longer.tokens == [6] and longer.confidence == [1.0]


def test_a_draft_stops_where_the_occurrences_disagree() -> None:
    pool = _pool(pool_ngram=2, pool_min_share=0.6)
    pool.add([1, 2, 3, 4, 10, 11])
    pool.add([1, 2, 3, 4, 20, 21])
    d = PoolDrafter(pool)
    d.begin([0, 7], ["ref"], np.random.default_rng(0))
    draft = d.propose([0, 7, 9, 1, 2], 8)
    assert draft.tokens == [3, 4] and draft.feature == "pool-le2-apply"
    assert d.propose([0, 7, 5, 6], 8).tokens == []


def test_an_answer_start_matches_the_starts_of_earlier_answers() -> None:
    pool = _pool(pool_ngram=3)
    pool.add([5, 6, 7, 8, 9])
    pool.add([1, 5, 6, 7, 2])  # 5 6 7 again, but not at its output's start
    d = PoolDrafter(pool)
    d.begin([40, 41], [], np.random.default_rng(0))
    # No output yet: the pool holds no prompts, so the match is with outputs' starts.
    draft = d.propose([40, 41], 8)
    assert draft.feature == "pool-start-chat" and draft.tokens[0] in (5, 1)
    after = d.propose([40, 41, 5, 6], 8)
    assert after.tokens == [7, 8, 9] and after.feature == "pool-start-chat"


def test_the_copy_goes_on_after_a_draft_taken_whole_and_after_a_rename() -> None:
    pool = _pool(pool_ngram=3)
    earlier = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23]
    pool.add(earlier)
    d = PoolDrafter(pool)
    prompt = [99]
    d.begin(prompt, [], np.random.default_rng(0))
    out = [10, 11, 12]
    draft = d.propose(prompt + out, 3)
    assert draft.tokens == [13, 14, 15]
    d.observe(draft, 3)
    out += [13, 14, 15, 16]  # taken whole, plus the target's own next token
    aligned = d.propose(prompt + out, 2)
    assert aligned.tokens == [17, 18] and aligned.feature == "pool-a-chat"
    d.observe(aligned, 0)  # the target renames 17 18 into 77
    out += [77]
    assert d.propose(prompt + out, 4).tokens == []  # nothing matches yet
    out += [19, 20]  # the output is back on the earlier text
    picked = d.propose(prompt + out, 4)
    assert picked.tokens == [21, 22, 23] and picked.feature == "pool-r-chat"


def test_oldest_outputs_are_evicted_under_the_memory_bound() -> None:
    pool = _pool(pool_ngram=2, pool_max_mb=100 * BYTES_PER_TOKEN / (1 << 20))
    assert pool.capacity == 100
    for i in range(10):
        pool.add([1000 + i, *range(i * 20, i * 20 + 30)])
    assert len(pool) <= 100 and pool.outputs == 3
    # The first outputs' n-grams are gone from the index, the last ones' are there.
    assert pool.matches([1000, 0])[1] == []
    assert pool.matches([1009, 180])[0] == 2
    positions = [p for slots in pool._index.values() for p in slots]
    assert min(positions) >= pool._base


def test_bytes_per_token_bounds_the_measured_memory() -> None:
    rng = np.random.default_rng(1)
    outputs = [rng.integers(0, 50_000, size=500).tolist() for _ in range(40)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    pool = _pool()
    for out in outputs:
        pool.add(out)
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert used / len(pool) <= BYTES_PER_TOKEN, used / len(pool)


def test_the_default_bound_is_64_mb() -> None:
    assert PoolSettings().pool_max_mb <= 64
    assert OutputPool().capacity * BYTES_PER_TOKEN <= 64 << 20


SOURCE = "".join(f"def handler_{i}(req):\n    return reply(req, {i})\n\n" for i in range(6))


def _gen(rt: FakeRuntime, drafters: list, ctl: Controller, text: str) -> list[int]:  # noqa: ANN001
    prompt = rt.tokenize("Q:" + text, add_bos=True)
    return generate(rt, prompt, drafters, ctl, GenConfig(max_tokens=160)).tokens


def test_lossless_in_the_loop_and_it_drafts_the_repeat() -> None:
    rt = FakeRuntime(follow=SOURCE)
    plain = _gen(rt, [], Controller(), SOURCE[:30])
    pool = _pool()
    ctl = Controller()
    first = _gen(rt, [PoolDrafter(pool)], ctl, SOURCE[:30])
    pool.add(first)
    forwards = rt.forwards
    again = generate(
        rt,
        rt.tokenize("Q:" + SOURCE[:30], add_bos=True),
        [PoolDrafter(pool)],
        ctl,
        GenConfig(max_tokens=160),
    )
    assert first == plain and again.tokens == plain
    assert rt.forwards - forwards < len(plain) / 3  # the repeat came from the pool
    assert any(s.source == "pool" and s.accepted > 8 for s in again.stats.steps)


class _Fixed:
    def __init__(self, name: str, draft: Draft) -> None:
        self.name, self.draft = name, draft

    def propose(self, context, limit):  # noqa: ANN001, ANN201
        return self.draft


def test_select_takes_the_cheap_draft_with_the_best_gain() -> None:
    ctl = Controller()
    short = Draft(tokens=[1, 2], source="reference", feature="ref-n-le2")
    long = Draft(tokens=list(range(40)), source="pool", feature="pool-gt16-apply")
    model = _Fixed("model", Draft(tokens=[5], source="model", feature="model"))
    draft, k = ctl.select([_Fixed("reference", short), _Fixed("pool", long), model], [0], 64)
    assert draft is long and k > 2


def test_engine_keeps_one_pool_per_user_and_can_turn_it_off() -> None:
    rt = FakeRuntime(follow=SOURCE)
    eng = Engine(rt, None, EngineConfig().override(kind="reference", use_pool=True))
    eng.generate(SOURCE[:20], max_tokens=40, chat=False, pool_key="alice")
    assert eng.pools["alice"].outputs == 1 and "bob" not in eng.pools
    eng.generate(SOURCE[:20], max_tokens=40, chat=False, pool_key="bob", use_pool=False)
    assert "bob" not in eng.pools
    off = Engine(rt, None, EngineConfig().override(kind="reference"))  # off by default
    off.generate(SOURCE[:20], max_tokens=40, chat=False)
    assert off.pools == {} and off.pool() is None
    off.generate(SOURCE[:20], max_tokens=40, chat=False, use_pool=True)
    assert off.pools[""].outputs == 1


TOKENS = (10, 11, 12)


class TableRuntime(FakeRuntime):
    """Next-token distribution keyed by the last token only."""

    def __init__(self, table: dict) -> None:  # noqa: ANN001
        super().__init__(n_ctx=64)
        self.table = table

    def _logits_for(self, ctx):  # noqa: ANN001, ANN202
        probs = self.table.get(ctx[-1], self.table[None])
        logits = np.full(self.n_vocab, -1e9, dtype=np.float32)
        logits[list(TOKENS)] = np.log(np.asarray(probs, dtype=np.float64))
        return logits


def test_sampling_keeps_the_target_distribution() -> None:
    # The pool always drafts token 12 first (an earlier answer's start); the target gives it 10%.
    p_first = (0.6, 0.3, 0.1)
    rt = TableRuntime({None: p_first})
    pool = _pool(pool_ngram=2)
    pool.add([12, 12, 12, 12, 12])
    n = 3000
    counts: Counter[int] = Counter()
    for seed in range(n):
        sampling = SamplingSettings(temperature=1.0, seed=seed)
        res = generate(
            rt, [0, 5, 6, 7], [PoolDrafter(pool)], Controller(), GenConfig(2, (), sampling, 2)
        )
        counts[res.tokens[0]] += 1
    chi2 = sum((counts[t] - n * p) ** 2 / (n * p) for t, p in zip(TOKENS, p_first, strict=True))
    assert chi2 < 13.82, counts  # chi-square, 2 degrees of freedom, alpha 0.001


@pytest.mark.real
def test_real_model_output_is_plain_greedy_and_the_pool_drafts(smollm2_rt) -> None:  # noqa: ANN001
    # Applies: the pool fills from each answer and the output stays plain greedy's.
    original = "import os\n\ndef paths(root):\n    return os.listdir(root)\n"
    update = "from pkg.util import load_config as read_settings\nimport os\n"
    eng = Engine(smollm2_rt, None, EngineConfig().override(kind="reference"))
    for name in ("paths", "names", "files"):
        text = original.replace("paths", name)
        plain = eng.apply(text, update, draft="none", engine="model", use_pool=False)
        spec = eng.apply(text, update, engine="model", use_pool=True)
        assert spec.text == plain.text, name
    assert eng.pools[""].outputs == 3
    # A request asked again, with no reference holding the first answer: only the pool can
    # draft it, and what it drafts is accepted.
    prompt = "Write a Python function that returns the squares of a list of numbers."
    first = eng.generate(prompt, max_tokens=48, draft="none", use_pool=True)
    again = eng.generate(prompt, max_tokens=48, use_pool=True)
    # A long pool draft is verified in one batch, whose logits differ from one-token ones
    # in their last bits: identical, or parted at a proven near-tie.
    tokens = eng.prompt_tokens(prompt, True)
    assert_same_or_near_tie(smollm2_rt, tokens, first.text, again.text, "pool redraft")
    accepted = sum(s.accepted for s in again.stats.steps if s.source == "pool")
    assert accepted > 0, "the pool never drafted an accepted token"


def test_bench_modes_with_and_without_the_pool() -> None:
    from edge_spec.bench.modes import parse_modes

    modes = parse_modes("spec-adaptive-nopool,spec-adaptive-pool,spec-adaptive")
    assert [(m.name, m.draft, m.pool) for m in modes] == [
        ("plain", "none", None),
        ("spec-adaptive-nopool", "hybrid", False),
        ("spec-adaptive-pool", "hybrid", True),
        ("spec-adaptive", "hybrid", None),
    ]


def test_line_split_counts_changed_lines_apart() -> None:
    from edge_spec.bench.metrics import line_split

    original = "a = 1\nb = 2\n"
    pieces = [b"a = 1", b"\n", b"c", b" = 3", b"\n", b"b = 2\n"]
    d = line_split(pieces, [2, 2, 2], original)
    # A newline belongs to the line it ends; the last forward's cost is shared half and half.
    assert d["changed_tokens"] == 3 and d["copied_tokens"] == 3
    assert d["changed_forwards"] == 1.5 and d["copied_forwards"] == 1.5

"""The chunked eval shared by the real backends: chunking, rows per chunk, views, checks."""

from __future__ import annotations

import numpy as np
import pytest

from edge_spec.errors import UserError
from edge_spec.runtimes.base import ArgmaxPool, Only, chunked_eval, host_greedy, masked_argmax


class Rows:
    """Just enough of a Runtime: logits row = [absolute position, token]."""

    n_vocab, n_ctx, n_batch = 2, 16, 3

    def __init__(self) -> None:
        self.n_tokens = 0
        self.calls: list[tuple[list[int], list[int], bool]] = []

    def forward(self, chunk: list[int], rows: list[int], last: bool) -> np.ndarray | None:
        self.calls.append((chunk, rows, last))
        out = np.array([[self.n_tokens + r, chunk[r]] for r in rows], dtype=np.float32)
        self.n_tokens += len(chunk)
        return out if rows else None


def test_rows_across_chunks() -> None:
    rt = Rows()
    got = chunked_eval(rt, range(10, 17), [6, 0, 4], rt.forward)  # type: ignore[arg-type]
    assert got.tolist() == [[0, 10], [4, 14], [6, 16]]
    assert rt.calls == [([10, 11, 12], [0], False), ([13, 14, 15], [1], False), ([16], [0], True)]


def test_default_row_is_the_last_and_empty_input() -> None:
    rt = Rows()
    assert chunked_eval(rt, [5, 6, 7, 8], None, rt.forward).tolist() == [[3, 8]]  # type: ignore[arg-type]
    assert chunked_eval(rt, [], [], rt.forward).shape == (0, 2)  # type: ignore[arg-type]
    assert chunked_eval(rt, [1, 2], [], rt.forward).shape == (0, 2)  # type: ignore[arg-type]


def test_bad_rows_and_full_context() -> None:
    rt = Rows()
    with pytest.raises(ValueError, match="outside 0..2"):
        chunked_eval(rt, [1, 2, 3], [3], rt.forward)  # type: ignore[arg-type]
    assert rt.calls == []  # checked before any work
    with pytest.raises(UserError, match="context full"):
        chunked_eval(rt, list(range(17)), [], rt.forward)  # type: ignore[arg-type]


def _argmax_walk(logits: np.ndarray, draft: list[int]) -> list[int]:
    out = []
    for i in range(len(draft) + 1):
        out.append(int(logits[i].argmax()))
        if i == len(draft) or out[-1] != draft[i]:
            break
    return out


def _case(
    rng: np.random.Generator, k: int, vocab: int, follow: float
) -> tuple[np.ndarray, list[int]]:
    """Logits rows with many ties, sometimes a NaN or a row of -inf, and a draft that follows
    the argmax with probability `follow` per token (the fast path) and sometimes not."""
    logits = rng.integers(0, 3, size=(k + 1, vocab)).astype(np.float32)
    if rng.random() < 0.2:
        logits[rng.integers(0, k + 1), rng.integers(0, vocab)] = np.nan
    if rng.random() < 0.2:
        logits[rng.integers(0, k + 1)] = -np.inf
    draft = [
        int(logits[i].argmax()) if rng.random() < follow else int(rng.integers(0, vocab))
        for i in range(k)
    ]
    return logits, draft


def test_host_greedy_is_the_argmax_walk_ties_and_nans_included() -> None:
    rng = np.random.default_rng(3)
    for _ in range(400):
        k, vocab = int(rng.integers(0, 6)), int(rng.integers(1, 9))
        logits, draft = _case(rng, k, vocab, 0.7)
        assert host_greedy(logits, draft) == _argmax_walk(logits, draft), (logits, draft)


@pytest.mark.parametrize(("threads", "block"), [(2, 1), (2, 3), (3, 2), (4, 5)])
def test_the_pooled_walk_is_the_argmax_walk(threads: int, block: int) -> None:
    rng = np.random.default_rng(threads * 10 + block)
    pool = ArgmaxPool(threads, block)
    try:
        for _ in range(300):
            logits, draft = _case(rng, int(rng.integers(0, 40)), int(rng.integers(1, 9)), 0.97)
            assert pool.takes(len(draft) + 1) == (len(draft) + 1 >= 2 * block)
            assert host_greedy(logits, draft, None, pool) == _argmax_walk(logits, draft)
    finally:
        pool.close()


def test_one_thread_or_a_mask_walks_on_the_calling_thread() -> None:
    assert not ArgmaxPool(1, 1).takes(1000)
    pool = ArgmaxPool(2, 1)
    logits = np.array([[0, 2, 1], [3, 0, 0], [0, 0, 1]], dtype=np.float32)
    # row 0 may not take 1, row 1 may only take 1 or 2: the masks win over the pool
    banned = [np.array([1]), Only(np.array([1, 2])), np.zeros(0, dtype=np.int64)]
    assert host_greedy(logits, [2, 1], banned, pool) == [2, 1, 2]
    assert pool._ex is None  # never started


def test_a_ban_array_masks_only_when_it_bans_the_maximum() -> None:
    rng = np.random.default_rng(5)
    for _ in range(500):
        row = rng.integers(0, 4, size=int(rng.integers(1, 9))).astype(np.float32)
        ban = np.unique(rng.integers(0, row.size, size=int(rng.integers(0, row.size + 1))))
        masked, orig = row.copy(), row.copy()
        masked[ban] = -np.inf
        assert masked_argmax(row, ban) == int(masked.argmax()), (row, ban)
        assert np.array_equal(row, orig)  # a logits view is never written

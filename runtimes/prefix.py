"""Reusing a runtime's KV cache across requests without changing what a fresh prompt computes.

A backend's logits for a token depend, in their last bits, on the shape of the batch that
evaluated it (matrix kernels tile and sum differently per batch size). A fresh prompt is
evaluated in n_batch chunks from position 0. `prefill` therefore reuses a cached prefix only in
whole chunks that a prefill evaluated from position 0 in exactly those shapes, and evaluates the
rest in the chunks a fresh prompt would use: a greedy request gives the same bytes whether its
prefix came from the cache or not. The price: at most n_batch - 1 cached tokens are evaluated
again, and a prompt shorter than n_batch is evaluated afresh, unless it is the very prompt the
last prefill made the cache hold (then every chunk of it had the fresh shapes already: the
target scores readings after the apply prompt of a window, then writes that window).

Example: `keep = prefill(rt, prompt[:-1])` (tokens reused; None if `cancel` was set)
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

from edge_spec.runtimes.base import Runtime

# Per runtime: how many leading KV entries were evaluated by `prefill` in whole n_batch chunks
# from position 0. Entries past it were evaluated in other shapes (a prompt's last partial chunk,
# decoding, verify steps) and are not reused by the next prompt.
_ALIGNED: weakref.WeakKeyDictionary[Runtime, int] = weakref.WeakKeyDictionary()
# Per runtime: the length of the prompt the last `prefill` made the cache hold, all of it in a
# fresh prefill's shapes (its last chunk partial or not); 0 once the cache was rolled back
# below it.
_WHOLE: weakref.WeakKeyDictionary[Runtime, int] = weakref.WeakKeyDictionary()


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def aligned_tokens(rt: Runtime) -> int:
    """Leading KV entries of `rt` evaluated as a fresh prefill would have evaluated them."""
    try:
        return min(_ALIGNED.get(rt, 0), rt.n_tokens)
    except TypeError:  # a runtime that takes no weak reference is never reused
        return 0


def _set_aligned(rt: Runtime, n: int) -> None:
    try:
        _ALIGNED[rt] = n
    except TypeError:
        pass


def _whole(rt: Runtime) -> int:
    try:
        return _WHOLE.get(rt, 0)
    except TypeError:
        return 0


def _set_whole(rt: Runtime, n: int) -> None:
    try:
        _WHOLE[rt] = n
    except TypeError:
        pass


def sync_prefix(rt: Runtime, tokens: Sequence[int]) -> int:
    """Roll the KV cache back to its common prefix with `tokens`; return that length."""
    keep = common_prefix(rt.tokens, tokens)
    if keep < rt.n_tokens:
        rt.truncate(keep)
        _set_aligned(rt, min(keep, aligned_tokens(rt)))
        if keep < _whole(rt):
            _set_whole(rt, 0)
    return keep


def prefill(
    rt: Runtime, tokens: Sequence[int], cancel: threading.Event | None = None
) -> int | None:
    """Make the KV cache hold `tokens`, in the chunk shapes of a fresh prefill (module doc).

    Returns how many tokens were reused from the cache, or None when `cancel` was set before a
    chunk (the cache then holds a prefix of `tokens`).
    """
    step = max(1, rt.n_batch)
    same = _whole(rt)
    keep = sync_prefix(rt, tokens)
    if keep == same == len(tokens) > 0:
        return keep
    _set_whole(rt, 0)
    keep = min(keep, aligned_tokens(rt)) // step * step
    if keep < rt.n_tokens:
        rt.truncate(keep)
    _set_aligned(rt, keep)
    for start in range(keep, len(tokens), step):
        if cancel is not None and cancel.is_set():
            return None
        end = min(start + step, len(tokens))
        rt.eval(tokens[start:end], rows=[])
        if end - start == step:
            _set_aligned(rt, end)
    _set_whole(rt, len(tokens))
    return keep

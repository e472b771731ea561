"""A prompt whose prefix came from the KV cache is evaluated in the chunk shapes of a fresh one."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from edge_spec.core.controller import Controller
from edge_spec.core.loop import GenConfig, generate
from edge_spec.runtimes.fake import FakeRuntime

N_BATCH = 8


class ShapeSpy(FakeRuntime):
    """Remembers, for every KV entry it holds, the forward that computed it: (first position,
    length), as llama_decode would have been called."""

    def __init__(self) -> None:
        super().__init__(follow="", n_batch=N_BATCH)
        self.origin: list[tuple[int, int]] = []

    def eval(self, tokens: Sequence[int], rows: Sequence[int] | None = None) -> np.ndarray:
        for start in range(0, len(tokens), self.n_batch):
            shape = (self.n_tokens + start, min(self.n_batch, len(tokens) - start))
            self.origin.extend([shape] * shape[1])
        return super().eval(tokens, rows)

    def truncate(self, n: int) -> None:
        super().truncate(n)
        del self.origin[n:]


def _run(rt: ShapeSpy, prompt: list[int]) -> list[int]:
    return generate(rt, prompt, [], Controller(), GenConfig(max_tokens=6)).tokens


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (29, 29),  # the same prompt again
        (29, 21),  # a shorter one sharing its head
        (29, 40),  # a longer one: the first prompt, its answer's place, then more
        (5, 5),  # shorter than one chunk
    ],
)
def test_cached_prefix_is_evaluated_in_fresh_shapes(first: int, second: int) -> None:
    base = [3 + (i * 7) % 200 for i in range(64)]
    warm = ShapeSpy()
    _run(warm, base[:first])
    cached = _run(warm, base[:second])
    fresh_rt = ShapeSpy()
    fresh = _run(fresh_rt, base[:second])
    assert cached == fresh
    # every KV entry the answer was computed from came out of a forward of the same shape
    assert warm.origin == fresh_rt.origin


@pytest.mark.parametrize("steps", [(29, 21, 29), (5, 3, 5), (29, 29, 21, 29), (12, 40, 12)])
def test_a_prompt_held_whole_is_reused_only_while_the_cache_holds_it(
    steps: tuple[int, ...],
) -> None:
    base = [3 + (i * 7) % 200 for i in range(64)]
    warm = ShapeSpy()
    for n in steps[:-1]:
        _run(warm, base[:n])
    cached = _run(warm, base[: steps[-1]])
    fresh_rt = ShapeSpy()
    assert cached == _run(fresh_rt, base[: steps[-1]])
    assert warm.origin == fresh_rt.origin

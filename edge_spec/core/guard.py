"""A decode-time guard: a constraint on the target, applied as a mask on every logits row.

The guard is part of the target: the loop masks the banned tokens in every logits row before
the argmax (or the softmax) is taken, in plain and speculative decoding alike, so greedy
speculative output still equals plain output of the guarded target. What a guard forbids is its
own business (apply's line guards live in `edge_spec.apply.guard.build`); the loop only follows its
state over the output's bytes and reads one row mask per verify row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, overload

from edge_spec.runtimes.base import RowBan, Runtime


class Guard(Protocol):
    """A constraint on the target: a state that follows the output's bytes, and the row mask
    in each state. The state is the guard's own (`start` it from the prompt's tail)."""

    def start(self, tail: bytes) -> Any: ...

    def advance(self, state: Any, piece: bytes) -> Any: ...

    def banned(self, state: Any) -> RowBan: ...


def guard_state(
    guard: Guard, rt: Runtime, prompt: Sequence[int], state: Any = None, *tokens: int
) -> Any:
    """The guard's state: from the prompt's tail when `state` is None, then after each of
    `tokens` (bytes, so a character split over tokens stays whole; the one place the loop,
    and the near-tie check, track it)."""
    if state is None:
        state = guard.start(b"".join(rt.token_bytes(t) for t in prompt[-16:]))
    for tok in tokens:
        state = guard.advance(state, rt.token_bytes(tok))
    return state


class RowMasks(Sequence[RowBan]):
    """The guard's mask per verify row (row i follows draft[:i] after `state`), each computed
    when first read: a host argmax stops at the first mismatch and never reads the rest."""

    def __init__(self, guard: Guard, state: Any, draft: Sequence[int], rt: Runtime) -> None:
        self._guard, self._rt, self._draft = guard, rt, draft
        self._states = [state]
        self._got: dict[int, RowBan] = {}

    def state(self, i: int) -> Any:
        """The guard's state after draft[:i] (the loop's own, once i draft tokens are accepted)."""
        while len(self._states) <= i:
            tok = self._draft[len(self._states) - 1]
            self._states.append(self._guard.advance(self._states[-1], self._rt.token_bytes(tok)))
        return self._states[i]

    def __len__(self) -> int:
        return len(self._draft) + 1

    @overload
    def __getitem__(self, i: int) -> RowBan: ...

    @overload
    def __getitem__(self, i: slice) -> list[RowBan]: ...

    def __getitem__(self, i: int | slice) -> RowBan | list[RowBan]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        got = self._got.get(i)
        if got is None:
            got = self._got[i] = self._guard.banned(self.state(i))
        return got

"""The `Drafter` protocol and the `Draft` it returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from edge_spec.adapt import Controller


@dataclass
class Draft:
    """Proposed tokens; `probs[i]` is the drafter's distribution for token i, or None (one-hot).

    `feature` is what the controller keys its acceptance estimate on (e.g. match-length bucket);
    `confidence[i]`, when given, is the drafter's own probability of token i.
    """

    tokens: list[int] = field(default_factory=list)
    source: str = "none"
    probs: list[np.ndarray] | None = None
    feature: str = ""
    confidence: list[float] | None = None
    draft_ms: float = 0.0

    def __len__(self) -> int:
        return len(self.tokens)

    def head(self, k: int) -> Draft:
        """The first k tokens of this draft."""
        probs = None if self.probs is None else self.probs[:k]
        conf = None if self.confidence is None else self.confidence[:k]
        return Draft(self.tokens[:k], self.source, probs, self.feature, conf, self.draft_ms)


EMPTY = Draft()


class Reference(str):
    """A reference text with `cuts`: character offsets where the answer may depart from it.

    The reference drafter ends a draft at the next cut, so a verify step never bets a long
    draft across a likely edit point; the target's bonus token then shows which way it went.

    >>> Reference("a\nb\n", cuts=(2,)).cuts
    (2,)
    """

    cuts: tuple[int, ...]

    def __new__(cls, text: str, cuts: Sequence[int] = ()) -> Reference:
        obj = super().__new__(cls, text)
        obj.cuts = tuple(sorted(set(cuts)))
        return obj


class Drafter(Protocol):
    """Proposes continuations of a context and learns from what the target accepted."""

    name: str

    def begin(self, prompt: Sequence[int], references: Sequence[str]) -> None:
        """Start a request: index the prompt and the reference texts."""
        ...

    def propose(self, context: Sequence[int], limit: int, ctl: Controller) -> Draft:
        """Up to `limit` tokens that likely follow `context` (prompt + output so far)."""
        ...

    def observe(self, draft: Draft, accepted: int) -> None:
        """The target accepted the first `accepted` tokens of `draft`."""
        ...

"""The types the loop, the controller and the drafters share: `Draft`, `Reference`, `Drafter`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass
class Draft:
    """Proposed tokens; `probs[i]` is the drafter's distribution for token i, or None (one-hot).

    `feature` is what the controller keys its acceptance estimate on (e.g. match-length bucket);
    `confidence[i]`, when given, is the drafter's own probability of token i. `draft_ms` is what
    proposing cost, `prefill_ms` the part of it spent bringing the drafter's own cache up to the
    context (paid once per request, so not a per-token cost).
    """

    tokens: list[int] = field(default_factory=list)
    source: str = "none"
    probs: list[np.ndarray] | None = None
    feature: str = ""
    confidence: list[float] | None = None
    draft_ms: float = 0.0
    prefill_ms: float = 0.0
    prefill_tokens: int = 0  # context tokens that prefill evaluated

    def __len__(self) -> int:
        return len(self.tokens)

    def head(self, k: int) -> Draft:
        """The first k tokens of this draft."""
        probs = None if self.probs is None else self.probs[:k]
        conf = None if self.confidence is None else self.confidence[:k]
        return Draft(
            self.tokens[:k],
            self.source,
            probs,
            self.feature,
            conf,
            self.draft_ms,
            self.prefill_ms,
            self.prefill_tokens,
        )


EMPTY = Draft()


@dataclass(frozen=True)
class Reference:
    """A text the output is likely to copy, with `cuts`: character offsets where it may depart.

    The reference drafter ends a draft at the next cut, so a verify step never bets a long
    draft across a likely edit point; the target's bonus token then shows which way it went.
    """

    text: str
    cuts: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "cuts", tuple(sorted(set(self.cuts))))

    @staticmethod
    def of(ref: str | Reference) -> Reference:
        return ref if isinstance(ref, Reference) else Reference(ref)


class Drafter(Protocol):
    """Proposes continuations of a context and learns from what the target accepted.

    A drafter only proposes; the controller decides how much of a draft to verify and which
    of several drafters to ask.
    """

    name: str

    def begin(
        self, prompt: Sequence[int], references: Sequence[Reference], rng: np.random.Generator
    ) -> None:
        """Start a request: index the prompt and references; `rng` is the drafter's own stream."""
        ...

    def propose(self, context: Sequence[int], max_len: int) -> Draft:
        """Up to `max_len` tokens that likely follow `context` (prompt + output so far)."""
        ...

    def observe(self, draft: Draft, accepted: int) -> None:
        """The target accepted the first `accepted` tokens of `draft` (which may be another's)."""
        ...

"""Model drafter: a small quantized model with its own KV cache drafts autoregressively."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from edge_spec.drafters.base import EMPTY, Draft
from edge_spec.runtimes.base import sync_prefix
from edge_spec.verify import SamplingConfig, target_probs

if TYPE_CHECKING:
    from edge_spec.adapt import Controller
    from edge_spec.runtimes.base import Runtime


def _softmax(row: np.ndarray) -> np.ndarray:
    x = row.astype(np.float64)
    x -= x.max()
    e = np.exp(x)
    return e / e.sum()


class ModelDrafter:
    """Drafts up to k tokens, stopping early when its top-1 probability falls under `p_min`.

    With sampling, it samples from its own (equally tempered) distribution and returns those
    distributions, so rejection sampling keeps the target's output distribution exact.
    """

    name = "model"

    def __init__(self, runtime: Runtime, sampling: SamplingConfig | None = None,
                 p_min: float = 0.6, seed: int | None = None) -> None:
        self.rt = runtime
        self.sampling = sampling or SamplingConfig()
        self.p_min = p_min
        self._rng = np.random.default_rng(seed)

    def begin(self, prompt: Sequence[int], references: Sequence[str]) -> None:
        self._rng = np.random.default_rng(self.sampling.seed)

    def propose(self, context: Sequence[int], limit: int, ctl: Controller) -> Draft:
        k = min(limit, ctl.best_k("model", limit)) if ctl is not None else limit
        if k <= 0:
            return EMPTY
        t0 = time.perf_counter()
        # The drafter's KV holds whatever it saw last; roll it back to the common prefix.
        keep = sync_prefix(self.rt, context)
        if keep == len(context):  # everything cached: re-evaluate the last token for logits
            self.rt.truncate(keep - 1)
            keep -= 1
        row = self.rt.eval(context[keep:])[0]
        tokens: list[int] = []
        probs: list[np.ndarray] = []
        conf: list[float] = []
        for i in range(k):
            if self.sampling.greedy:
                tok = int(row.argmax())
                p_tok = float(_softmax(row)[tok])
            else:
                q = target_probs(row, self.sampling)
                tok = int(self._rng.choice(q.size, p=q))
                p_tok = float(q.max())
                probs.append(q)
            if p_tok < self.p_min and i > 0:
                if probs:
                    probs.pop()
                break
            tokens.append(tok)
            conf.append(p_tok)
            if i + 1 < k:
                row = self.rt.eval([tok])[0]
        ms = (time.perf_counter() - t0) * 1e3
        return Draft(tokens=tokens, source="model", probs=probs or None, feature="model",
                     confidence=conf, draft_ms=ms)

    def observe(self, draft: Draft, accepted: int) -> None:
        """Nothing to do: the next propose() rolls the KV cache back to the common prefix."""

"""Model drafter: a small quantized model with its own KV cache drafts autoregressively."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from edge_spec.config.settings import SamplingSettings
from edge_spec.core.types import EMPTY, Draft, Reference
from edge_spec.core.verify import target_probs
from edge_spec.runtimes.base import Runtime
from edge_spec.runtimes.prefix import sync_prefix


def _softmax(row: np.ndarray) -> np.ndarray:
    x = row.astype(np.float64)
    x -= x.max()
    e = np.exp(x)
    return e / e.sum()


class ModelDrafter:
    """Drafts up to `max_len` tokens, stopping early when its own probability of the token it
    picked falls under `p_min`.

    With sampling, it samples from its own (equally tempered) distribution, from the generator
    the loop hands it (independent of the verifier's), and returns those distributions, so
    rejection sampling keeps the target's output distribution exact. Its cache is brought up to
    the prompt on the first draft a request asks for, so a request that never drafts with the
    model never pays that prefill; the time is reported apart from the per-token cost.
    """

    name = "model"

    def __init__(
        self,
        runtime: Runtime | Callable[[], Runtime],
        sampling: SamplingSettings | None = None,
        p_min: float = 0.6,
    ) -> None:
        # A callable loads the drafter model on the first draft asked of it.
        self._runtime = runtime
        self.sampling = sampling or SamplingSettings()
        self.p_min = p_min
        self._rng = np.random.default_rng()
        self._n_prompt = 0

    @property
    def rt(self) -> Runtime:
        if callable(self._runtime):  # runtimes are not callable; a loader is
            self._runtime = self._runtime()
        return self._runtime

    def begin(
        self, prompt: Sequence[int], references: Sequence[Reference], rng: np.random.Generator
    ) -> None:
        self._rng = rng
        self._n_prompt = len(prompt)

    def _catch_up(self, context: Sequence[int]) -> tuple[np.ndarray, float, int]:
        """Logits after `context`, syncing the drafter's cache; (row, prefill ms and tokens if
        the cache had not seen the whole prompt yet)."""
        t0 = time.perf_counter()
        # The drafter's KV holds whatever it saw last; roll it back to the common prefix.
        keep = sync_prefix(self.rt, context)
        if keep == len(context):  # everything cached: re-evaluate the last token for logits
            self.rt.truncate(keep - 1)
            keep -= 1
        row = self.rt.eval(context[keep:])[0]
        ms = (time.perf_counter() - t0) * 1e3
        if keep < self._n_prompt:
            return row, ms, len(context) - keep
        return row, 0.0, 0

    def propose(self, context: Sequence[int], max_len: int) -> Draft:
        if max_len <= 0 or not context:
            return EMPTY
        t0 = time.perf_counter()
        row, prefill_ms, prefill_tokens = self._catch_up(context)
        tokens: list[int] = []
        probs: list[np.ndarray] = []
        conf: list[float] = []
        for i in range(max_len):
            if self.sampling.greedy:
                tok = int(row.argmax())
                p_tok = float(_softmax(row)[tok])
            else:
                q = target_probs(row, self.sampling)
                tok = int(self._rng.choice(q.size, p=q))
                p_tok = float(q[tok])
            if p_tok < self.p_min and i > 0:
                break
            tokens.append(tok)
            conf.append(p_tok)
            if not self.sampling.greedy:
                probs.append(q)
            if i + 1 < max_len:
                row = self.rt.eval([tok])[0]
        ms = (time.perf_counter() - t0) * 1e3
        return Draft(
            tokens=tokens,
            source="model",
            probs=probs or None,
            feature="model",
            confidence=conf,
            draft_ms=ms,
            prefill_ms=prefill_ms,
            prefill_tokens=prefill_tokens,
        )

    def observe(self, draft: Draft, accepted: int) -> None:
        """Nothing to do: the next propose() rolls the KV cache back to the common prefix."""

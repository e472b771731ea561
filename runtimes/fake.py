"""A deterministic byte-level fake model for unit tests of the loop.

Tokens are bytes (id = byte + 3; 0 BOS, 1 EOS, 2 PAD), so multi-byte UTF-8 characters split
across tokens just as they do with real BPE vocabularies. The next-token logits are a pure
function of the context, so batched and single-token evaluation agree exactly.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from edge_spec.runtimes.base import Banned, VocabInfo, chunked_eval, fingerprint, host_greedy

BOS, EOS, PAD, OFFSET = 0, 1, 2, 3
N_VOCAB = 256 + OFFSET


class VirtualClock:
    """Milliseconds that pass only when a fake forward "takes" its latency: pass it to the fake
    and as `generate(clock=...)` for step timings free of the machine's load."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms


class FakeRuntime:
    """Copies `follow` text where the context matches it, else emits seeded noise.

    >>> rt = FakeRuntime(follow="hello world")
    >>> bool(rt.eval(rt.tokenize("hel"))[0].argmax() == rt.tokenize("l")[0])
    True
    """

    def __init__(
        self,
        follow: str = "",
        seed: int = 0,
        n_ctx: int = 4096,
        match: int = 24,
        eos_after: str | None = None,
        sharpness: float = 8.0,
        latency_ms: tuple[float, float] = (0.0, 0.0),
        n_batch: int = 512,
        clock: VirtualClock | None = None,
    ) -> None:
        self.name = "fake"
        self.path: Path | None = None
        self.n_vocab = N_VOCAB
        self.n_ctx = n_ctx
        self.n_batch = n_batch
        self.seed = seed
        self.match = match
        self.sharpness = sharpness
        self.latency_ms = latency_ms  # (per forward, per token): makes step costs realistic
        self.clock = clock  # when given, latency advances it instead of sleeping
        self._follow = self.tokenize(follow)
        self._eos_after = self.tokenize(eos_after) if eos_after else None
        self._tokens: list[int] = []
        self.forwards = 0
        self.evaluated = 0

    @property
    def n_tokens(self) -> int:
        return len(self._tokens)

    @property
    def tokens(self) -> list[int]:
        return self._tokens

    @property
    def chat_template(self) -> str | None:
        return None

    def _logits_for(self, ctx: Sequence[int]) -> np.ndarray:
        tail = tuple(ctx[-self.match :])
        digest = hashlib.blake2b(repr((self.seed, tail)).encode(), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(digest, "little"))
        logits = rng.normal(0.0, 1.0, self.n_vocab).astype(np.float32)
        logits[BOS] = logits[PAD] = -1e9
        if self._eos_after and tuple(ctx[-len(self._eos_after) :]) == tuple(self._eos_after):
            logits[EOS] = 50.0
            return logits
        logits[EOS] -= 4.0
        nxt = self._follow_next(tail)
        if nxt is not None:
            logits[nxt] += self.sharpness
        return logits

    def _follow_next(self, tail: tuple[int, ...]) -> int | None:
        """The token after the longest suffix of `tail` (3 tokens at least) found in `follow`."""
        f = self._follow
        if not tail:
            return f[0] if f else None
        for m in range(len(tail), 2, -1):
            key = list(tail[-m:])
            for i in range(len(f) - m):
                if f[i : i + m] == key:
                    return f[i + m]
        return None

    def eval(self, tokens: Sequence[int], rows: Sequence[int] | None = None) -> np.ndarray:
        return chunked_eval(self, tokens, rows, self._forward)

    def _forward(self, chunk: list[int], rows: list[int], last: bool) -> np.ndarray:
        start = self.n_tokens
        self._tokens.extend(chunk)
        self.forwards += 1
        fixed, per_token = self.latency_ms
        if fixed or per_token:
            ms = fixed + per_token * len(chunk)
            if self.clock is not None:
                self.clock.advance(ms)
            else:
                time.sleep(ms / 1e3)
        self.evaluated += len(chunk)
        out = np.empty((len(rows), self.n_vocab), dtype=np.float32)
        for j, r in enumerate(rows):
            out[j] = self._logits_for(self._tokens[: start + r + 1])
        return out

    def greedy(self, tokens: Sequence[int], banned: Banned = None) -> list[int]:
        return host_greedy(self.eval(tokens, rows=range(len(tokens))), tokens[1:], banned)

    def truncate(self, n: int) -> None:
        if not 0 <= n <= self.n_tokens:
            raise ValueError(f"truncate({n}) outside 0..{self.n_tokens}")
        del self._tokens[n:]

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = True) -> list[int]:
        ids = [b + OFFSET for b in text.encode("utf-8")]
        return [BOS, *ids] if add_bos else ids

    def token_bytes(self, token: int) -> bytes:
        return bytes([token - OFFSET]) if token >= OFFSET else b""

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")

    def is_eog(self, token: int) -> bool:
        return token == EOS

    bos_id = BOS
    add_bos = True

    @property
    def metadata(self) -> dict[str, str]:
        return {}

    @property
    def vocab(self) -> VocabInfo:
        texts = ("<s>", "</s>", "<pad>", *(bytes([b]).decode("latin-1") for b in range(256)))
        return VocabInfo(
            size=N_VOCAB,
            vocab_type="byte",
            bos_id=BOS,
            eos_id=EOS,
            eog_ids=frozenset({EOS}),
            fingerprint=fingerprint(texts, BOS, EOS),
            token_text=texts,
        )

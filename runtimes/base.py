"""The `Runtime` protocol every backend implements, and helpers shared by backends."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from edge_spec.config.settings import ARGMAX_ROW_BLOCK, RuntimeSettings
from edge_spec.errors import UserError

RuntimeOptions = RuntimeSettings  # the settings tree's [runtime] section


@dataclass(frozen=True)
class VocabInfo:
    """What pairing needs to know about a tokenizer (docs/design.md, "Pairing")."""

    size: int
    vocab_type: str
    bos_id: int | None
    eos_id: int | None
    eog_ids: frozenset[int]
    fingerprint: str
    token_text: tuple[str, ...] = field(repr=False, default=())


@runtime_checkable
class Runtime(Protocol):
    """A model with a KV cache that grows by `eval` and shrinks by `truncate`.

    `rt.eval([1, 2, 3], rows=[2])` has shape `(1, rt.n_vocab)`: the logits after the last
    of the 3 tokens.
    """

    name: str
    n_vocab: int
    n_ctx: int
    n_batch: int  # most tokens one forward takes; `eval` chunks longer inputs by it
    path: Path | None  # the model file or folder, None for in-memory models

    @property
    def n_tokens(self) -> int: ...

    @property
    def tokens(self) -> list[int]:
        """The token ids currently held in the KV cache, in order."""
        ...

    def eval(self, tokens: Sequence[int], rows: Sequence[int] | None = None) -> np.ndarray:
        """Append `tokens` after the KV state; return float32 logits `[len(rows), n_vocab]`.

        `rows` index into `tokens` (default: the last one only; `[]` for none). The array may be
        a view into backend memory that the next `eval` overwrites: copy what you keep.
        """
        ...

    def greedy(self, tokens: Sequence[int], banned: Banned = None) -> list[int]:
        """Append `tokens` (the pending token, then a draft) and verify greedily.

        Returns the target's argmax after each row, up to and including the first that differs
        from the draft (row i follows `tokens[:i + 1]`; its choice is compared with
        `tokens[i + 1]`). `banned[i]` are token ids masked out of row i first. GPU backends
        take the argmax on the device, so only these few ids cross to the host.
        """
        ...

    def truncate(self, n: int) -> None:
        """Keep only the first `n` tokens of the KV cache."""
        ...

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = True) -> list[int]: ...

    def token_bytes(self, token: int) -> bytes:
        """The bytes a token contributes to output text (empty for control tokens)."""
        ...

    def detokenize(self, tokens: Sequence[int]) -> str: ...

    @property
    def vocab(self) -> VocabInfo: ...

    @property
    def chat_template(self) -> str | None: ...

    @property
    def metadata(self) -> dict[str, str]:
        """Model metadata (GGUF keys such as general.name); empty when there is none."""
        ...

    @property
    def bos_id(self) -> int | None: ...

    @property
    def add_bos(self) -> bool:
        """Whether the model expects a BOS token at the start of a prompt."""
        ...

    def is_eog(self, token: int) -> bool: ...


@dataclass(frozen=True)
class Only:
    """A row mask that keeps only `ids` (sorted, unique): every other token is banned."""

    ids: np.ndarray


RowBan = np.ndarray | Only  # token ids the target may not choose, or the only ones it may
Banned = Sequence[RowBan] | None  # per verify row


def masked_argmax(row: np.ndarray, ban: RowBan | None) -> int:
    """The argmax of one logits row under its mask (ties go to the lowest id, as unmasked)."""
    if isinstance(ban, Only):
        return int(ban.ids[row[ban.ids].argmax()]) if ban.ids.size else int(row.argmax())
    best = int(row.argmax())
    if ban is None or not ban.size or not (ban == best).any():
        return best  # the first maximum is allowed, so masking the others cannot move it
    row = np.array(row, copy=True)
    row[ban] = -np.inf
    return int(row.argmax())


def mask_row(row: np.ndarray, ban: RowBan) -> None:
    """Set the banned logits of `row` (writable) to -inf."""
    if isinstance(ban, Only):
        if ban.ids.size:
            keep = row[ban.ids].copy()
            row[:] = -np.inf
            row[ban.ids] = keep
    elif ban.size:
        row[ban] = -np.inf


def has_only(banned: Banned) -> bool:
    """Whether some row keeps a list of allowed ids (a device ban list would be the rest)."""
    return banned is not None and any(isinstance(b, Only) for b in banned)


def host_greedy(
    logits: np.ndarray, draft: Sequence[int], banned: Banned = None, pool: ArgmaxPool | None = None
) -> list[int]:
    """`Runtime.greedy` on host logits rows: argmax row by row, stopping at the first mismatch.

    With a `pool`, a long unmasked walk reads blocks of rows on several cores at once.
    """
    if banned is None and pool is not None and pool.takes(len(draft) + 1):
        return pool.walk(logits, draft)
    out: list[int] = []
    for i in range(len(draft) + 1):
        best = masked_argmax(logits[i], None if banned is None else banned[i])
        out.append(best)
        if i == len(draft) or best != draft[i]:
            break
    return out


def _block_walk(logits: np.ndarray, draft: Sequence[int], lo: int, hi: int) -> list[int]:
    """Rows lo..hi-1 of the walk: their argmax up to and including the first miss."""
    ids = logits[lo:hi].argmax(axis=1).tolist()
    for j, best in enumerate(ids):
        if lo + j == len(draft) or best != draft[lo + j]:
            return ids[: j + 1]
    return ids


class ArgmaxPool:
    """Idle cores for a long verify's argmax: numpy lets the GIL go while it reads a row block.

    Reading 151,936 float32 logits per row is bound by one core's memory bandwidth, and between
    two forwards the backend's threads wait, so a wave of blocks (one on the calling thread, one
    per worker) reads in parallel. A wave ends before the walk returns: a backend may overwrite
    or move its logits buffer in the next forward.
    """

    def __init__(self, threads: int, block: int = ARGMAX_ROW_BLOCK) -> None:
        self.workers = max(0, threads - 1)
        self.block = max(1, block)
        self._ex: ThreadPoolExecutor | None = None

    def takes(self, rows: int) -> bool:
        """Whether a walk of `rows` rows gains from workers (two blocks at least)."""
        return self.workers > 0 and rows >= 2 * self.block

    def walk(self, logits: np.ndarray, draft: Sequence[int]) -> list[int]:
        """`host_greedy` without masks, wave by wave."""
        if self._ex is None:
            self._ex = ThreadPoolExecutor(self.workers, thread_name_prefix="edge-spec-argmax")
        n, b, out = len(draft) + 1, self.block, list[int]()
        for lo in range(0, n, b * (self.workers + 1)):
            starts = range(lo, min(lo + b * (self.workers + 1), n), b)
            ahead = [
                self._ex.submit(_block_walk, logits, draft, s, min(s + b, n)) for s in starts[1:]
            ]
            parts = [_block_walk(logits, draft, lo, min(lo + b, n))]
            parts += [f.result() for f in ahead]  # every one: see the class note
            for part in parts:
                out += part
                if len(out) == n or out[-1] != draft[len(out) - 1]:
                    return out
        return out

    def close(self) -> None:
        if self._ex is not None:
            self._ex.shutdown(wait=True)
            self._ex = None


def wanted_rows(rt: Runtime, n: int, rows: Sequence[int] | None) -> list[int]:
    """Check that `n` more tokens fit the context; return the logits rows asked for, sorted."""
    if rt.n_tokens + n > rt.n_ctx:
        raise UserError(
            f"context full: {rt.n_tokens} + {n} tokens exceed n_ctx "
            f"{rt.n_ctx}; raise n_ctx or shorten the input"
        )
    want = [n - 1] if rows is None else sorted(rows)
    if want and not 0 <= want[0] <= want[-1] < n:
        raise ValueError(f"rows {want[0]}..{want[-1]} outside 0..{n - 1}")
    return want


# forward(chunk, rows in the chunk, is the last chunk) -> logits of those rows (None if none):
# the one thing a backend does differently; the last chunk's logits may stay a view.
Forward = Callable[[list[int], list[int], bool], "np.ndarray | None"]


def chunked_eval(
    rt: Runtime, tokens: Sequence[int], rows: Sequence[int] | None, forward: Forward
) -> np.ndarray:
    """`Runtime.eval` for any backend: check, split into n_batch chunks, gather the rows asked."""
    n = len(tokens)
    want = wanted_rows(rt, n, rows) if n else []
    out: list[np.ndarray] = []
    for start in range(0, n, rt.n_batch):
        chunk = [int(t) for t in tokens[start : start + rt.n_batch]]
        local = [r - start for r in want if start <= r < start + len(chunk)]
        logits = forward(chunk, local, start + rt.n_batch >= n)
        if local and logits is not None:
            out.append(logits)
    if not out:
        return np.zeros((0, rt.n_vocab), dtype=np.float32)
    return out[0] if len(out) == 1 else np.concatenate(out)


def fingerprint(token_text: Sequence[str], bos: int | None, eos: int | None) -> str:
    """A short hash over token texts and special ids, equal for tokenizers that pair."""
    h = hashlib.sha256()
    h.update(f"{bos}|{eos}|{len(token_text)}|".encode())
    for t in token_text:
        h.update(t.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:16]

"""Prefix-affinity routing for the Ray Serve cluster (see `edge_spec.server.cluster`).

An IDE re-sends the same file many times; each engine replica keeps the KV cache of the prompt
it ran last, so a re-sent file is cheap only on the replica that saw it. The ingress computes an
*affinity key* (a hash of the long shared prefix of a request) and passes it as the first
argument of the engine call; `AffinityRouter`, a Ray Serve `RequestRouter`, turns the key into a
preferred replica by rendezvous hashing (the same key keeps its replica while the replica set
changes elsewhere; a lost replica only moves its own keys) and ranks every other replica after
it, where Ray's base router picks the least loaded. So a busy or dead preferred replica costs a
cache miss, never a wait: a home with more requests queued than another replica ranks last.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from edge_spec.errors import require

require("ray", "cluster")

from ray.serve.request_router import (  # noqa: E402
    FIFOMixin,
    PendingRequest,
    RequestRouter,
    RunningReplica,
)

from edge_spec.config.settings import AFFINITY_MODES  # noqa: E402
from edge_spec.server.wire import (  # noqa: E402
    ApplyRequest,
    ChatRequest,
    CompletionRequest,
    code_blocks,
    text_of,
)

PREFIX_CHARS = 8192  # the key hashes at most this much: longer prefixes rarely differ only later


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def affinity_key(req: Any, min_chars: int = 256) -> str | None:
    """The affinity key of a parsed request, or None when it shares no long prefix worth routing.

    apply: the original file (the apply prompt puts it first). chat: the prediction, else the
    first long fenced code block, else the system prompt + first user message. completions: the
    start of the prompt.
    """
    if isinstance(req, ApplyRequest):
        text = req.original
    elif isinstance(req, ChatRequest):
        text = text_of(req.prediction.content) if req.prediction else ""
        if len(text) < min_chars:
            texts = [text_of(m.content) for m in req.messages]
            long_blocks = [b for t in texts for b in code_blocks(t) if len(b) >= min_chars]
            text = long_blocks[0] if long_blocks else _head(req)
    elif isinstance(req, CompletionRequest):
        prompt = req.prompt
        text = prompt if isinstance(prompt, str) else (prompt[0] if prompt else "")
    else:
        return None
    if len(text) < max(min_chars, 1):
        return None
    return _digest(text[:PREFIX_CHARS])


def _head(req: ChatRequest) -> str:
    """The system prompt(s) and the first user message: what a conversation's turns share."""
    parts: list[str] = []
    for m in req.messages:
        parts.append(text_of(m.content))
        if m.role == "user":
            break
    return "\n".join(parts)


def rank_by_key(key: str, replica_ids: list[str]) -> list[str]:
    """Replica ids in rendezvous-hash order for `key`: the first is the key's home.

    >>> rank_by_key("k", ["a", "b"]) == rank_by_key("k", ["b", "a"])
    True
    """
    return sorted(replica_ids, key=lambda r: _digest(f"{key}|{r}"), reverse=True)


class AffinityRouter(FIFOMixin, RequestRouter):
    """Routes by the affinity key (the call's first argument); the rest ranks second.

    `mode` (request_router_kwargs): "prefix" (the default), "random" (a random replica first,
    the baseline the benchmark compares against) or "least-loaded" (Ray's choice among all).
    """

    def initialize_state(self, mode: str = "prefix", **_: Any) -> None:
        if mode not in AFFINITY_MODES:
            raise ValueError(f"unknown affinity mode {mode!r}: use one of {AFFINITY_MODES}")
        self.mode = mode
        self.rng = random.Random()

    async def choose_replicas(
        self,
        candidate_replicas: list[RunningReplica],
        pending_request: PendingRequest | None = None,
    ) -> list[list[RunningReplica]]:
        if pending_request is not None:
            # Without it Ray's base router retries a full replica set in a tight loop: every
            # pass probes each replica's queue length over RPC, which took a third to half a
            # core in the ingress and starved the engine it waited for (benchmarks/results/cluster-load-amd-epyc-2core).
            pending_request.routing_context.should_backoff = True
        key = _key_of(pending_request)
        mode = getattr(self, "mode", "prefix")
        if (
            len(candidate_replicas) < 2
            or mode == "least-loaded"
            or (key is None and mode == "prefix")
        ):
            return [candidate_replicas]
        if mode == "random":
            first = self.rng.choice(candidate_replicas)
        else:
            by_id = {r.replica_id.unique_id: r for r in candidate_replicas}
            first = by_id[rank_by_key(key or "", list(by_id))[0]]
        rest = [r for r in candidate_replicas if r is not first]
        # A replica admits a small backlog (it starts the next request without waiting for the
        # router), so "not full" is not "free": a home with more queued than another replica
        # would cost a wait, and a cache miss is cheaper. Within a rank Ray's base router picks
        # the least loaded; a rank is skipped when all of it is full (or gone).
        if self._load(first) > min(self._load(r) for r in rest):
            return [rest, [first]]
        return [[first], rest]

    def _load(self, replica: RunningReplica) -> int:
        """Requests on `replica` as this router counts them (sent, not yet finished)."""
        return self.replica_queue_len_cache.get(replica.replica_id) or 0


def _key_of(pending: PendingRequest | None) -> str | None:
    if pending is None:
        return None
    if pending.args and isinstance(pending.args[0], str):
        return pending.args[0] or None
    key = pending.kwargs.get("affinity")
    return key if isinstance(key, str) and key else None

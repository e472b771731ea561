"""Per-step and per-request statistics of the speculative loop."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Step:
    source: str
    feature: str
    k: int
    accepted: int
    emitted: int
    verify_ms: float
    draft_ms: float


@dataclass
class Stats:
    """What one generation did; `to_dict` is the JSON contract (docs/design.md, "Machine-readable output")."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    ttft_ms: float = 0.0
    finish_reason: str = ""
    draft: str = "none"
    steps: list[Step] = field(default_factory=list)

    def add(self, step: Step) -> None:
        self.steps.append(step)

    @property
    def target_forwards(self) -> int:
        return len(self.steps)

    @property
    def drafted(self) -> int:
        return sum(s.k for s in self.steps)

    @property
    def accepted(self) -> int:
        return sum(s.accepted for s in self.steps)

    def per_source(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for s in self.steps:
            d = out.setdefault(s.source, {"steps": 0, "drafted": 0, "accepted": 0})
            d["steps"] += 1
            d["drafted"] += s.k
            d["accepted"] += s.accepted
        for d in out.values():
            d["acceptance"] = d["accepted"] / d["drafted"] if d["drafted"] else 0.0
        return out

    def to_dict(self, steps: bool = False) -> dict[str, Any]:
        dec_s = self.decode_ms / 1e3
        drafted = self.drafted
        hist = Counter(s.accepted for s in self.steps if s.k)
        d: dict[str, Any] = {
            "finish_reason": self.finish_reason,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
            "prefill_ms": round(self.prefill_ms, 2),
            "prefill_tok_s": round(
                (self.prompt_tokens - self.cached_tokens) / (self.prefill_ms / 1e3), 2
            )
            if self.prefill_ms
            else 0.0,
            "ttft_ms": round(self.ttft_ms, 2),
            "decode_ms": round(self.decode_ms, 2),
            "decode_tok_s": round(self.output_tokens / dec_s, 2) if dec_s else 0.0,
            "target_forwards": self.target_forwards,
            "tokens_per_forward": round(self.output_tokens / self.target_forwards, 3)
            if self.target_forwards
            else 0.0,
            "drafted": drafted,
            "accepted": self.accepted,
            "acceptance": round(self.accepted / drafted, 4) if drafted else 0.0,
            "draft": self.draft,
            "per_source": self.per_source(),
            "accepted_hist": {str(k): v for k, v in sorted(hist.items())},
            "verify_ms_total": round(sum(s.verify_ms for s in self.steps), 2),
            "draft_ms_total": round(sum(s.draft_ms for s in self.steps), 2),
        }
        if steps:
            d["steps"] = [asdict(s) for s in self.steps]
        return d

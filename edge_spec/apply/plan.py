"""The apply pipeline: one plan per request, built here and run by every front end.

A plan holds what the model needs (prompt tokens, answer prefix, stop strings, references with
cut points, token budget) and what turns its answer into the file (cleaning, CRLF, the lazy-answer
policy). `Engine.apply`, the server, `edge-spec run` and `edge-spec bench` (its peers included)
all go through `plan_apply` and `ApplyPlan.finish`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edge_spec.apply.clean import clean_output, lazy_lines
from edge_spec.apply.guard.build import apply_guard, lines_guard
from edge_spec.apply.guard.context import context_pairs, hunk_follows
from edge_spec.apply.merge import MergeResult, detect_language, structural_merge
from edge_spec.apply.merge.markers import snippet_markers
from edge_spec.apply.merge.naive import MARKER, edit_references
from edge_spec.apply.templates import Template, build_messages, pick_template
from edge_spec.config.settings import (
    GUARD_MODES,
    LAZY_POLICIES,
    AnsweredBy,
    GuardMode,
    LazyPolicy,
)
from edge_spec.core.chat import chat_tokens
from edge_spec.core.guard import Guard
from edge_spec.core.stats import Stats
from edge_spec.core.types import Reference
from edge_spec.errors import UserError
from edge_spec.runtimes.base import Runtime


@dataclass
class ApplyResult:
    """The merged file, the raw model answer and the generation stats."""

    text: str
    raw: str
    stats: Stats
    template: str
    extra: dict[str, Any] = field(default_factory=dict)
    # 1-based lines of the model's answer that are edit markers the original does not have:
    # the model left code out ("lazy" output). `fallback` says what replaced its text, if anything.
    lazy_lines: list[int] = field(default_factory=list)
    fallback: str | None = None
    # Who wrote the file ("merge": the structural merge alone, no model; "model"), the merge's
    # verdict per hunk, and what the answer check found wrong with a model's file.
    engine: AnsweredBy = "model"
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    suspect: list[str] = field(default_factory=list)
    # What a model's file does that the snippet allows but does not say (it is written all
    # the same, with these warnings).
    warnings: list[str] = field(default_factory=list)
    language: str = ""
    # engine "region": the windows the model rewrote (1-based original lines, hunks, tokens).
    regions: list[dict[str, Any]] = field(default_factory=list)
    # Per unsure hunk, how many placements the target chose among, the winner's span (1-based
    # original lines), its lead in log-likelihood (nats), whether it answered (engine
    # "choice") or was not clear enough (another engine wrote the file after it), and the
    # milliseconds the choice took.
    choice: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The apply fields of the JSON contract (besides the generation stats)."""
        return {
            "engine": self.engine,
            "verdicts": self.verdicts,
            "suspect": self.suspect,
            "warnings": self.warnings,
            "lazy_lines": self.lazy_lines,
            "fallback": self.fallback,
            "regions": self.regions,
            "choice": self.choice,
        }


@dataclass(frozen=True)
class ApplyPlan:
    """Everything one apply request needs, computed once."""

    original: str  # as given (CRLF kept)
    template: Template
    tokens: list[int]
    prefix: str
    stop: tuple[str, ...]
    references: tuple[Reference, ...]
    budget: int
    merged: str  # the merge the model drafts from (LF line ends)
    guard: Guard | None = None  # the decode-time guard (part of the target), if any
    markers: tuple[str, ...] = ()  # the snippet's marker lines the original does not have

    @property
    def crlf(self) -> bool:
        return "\r\n" in self.original

    def stream_filter(self, on_delta: Callable[[str], None] | None) -> Callable[[str], None] | None:
        """Wrap a delta callback so streamed text gets the original's line ends."""
        if on_delta is None or not self.crlf:
            return on_delta
        user_cb = on_delta
        return lambda d: user_cb(d.replace("\n", "\r\n"))

    def clean(self, raw: str, stopped: bool) -> str:
        """The model's raw answer -> file text (wrapper gone, final newline and CRLF as the
        original's)."""
        return clean_output(raw, self.original, self.prefix, self.stop, stopped)

    def finish(
        self, raw: str, stats: Stats, tokens: list[int], on_lazy: LazyPolicy = "keep"
    ) -> ApplyResult:
        """The result of a finished generation, with the lazy-answer policy applied."""
        text = self.clean(raw, stats.finish_reason == "stop")
        res = ApplyResult(
            text=text,
            raw=raw,
            stats=stats,
            template=self.template.name,
            extra={"tokens": tokens, "prompt": self.tokens, "guard": self.guard},
        )
        return _lazy_policy(res, on_lazy, self.original, self.merged, self.markers)


def plan_apply(
    target: Runtime,
    original: str,
    update: str,
    instruction: str | None = None,
    *,
    template: str | None = None,
    lang: str = "",
    max_tokens: int | None = None,
    merged: str | None = None,
    guard: GuardMode | bool = "order",
    merge: MergeResult | None = None,
) -> ApplyPlan:
    """Build the plan for merging `update` into `original` with `target`.

    `merged` (the structural merge's best text, when there is one) replaces the naive merge as
    the first drafting reference: where the model follows the snippet, it predicts the edits.
    The `order` guard reads the hunks the structural merge places for sure (`merge`, of these
    two texts; made here when not given) as context where their copies must go on with them.
    """
    original_lf, update_lf = original.replace("\r\n", "\n"), update.replace("\r\n", "\n")
    tpl = pick_template(target.metadata, template)
    msgs, prefix, stop = build_messages(tpl, original_lf, update_lf, instruction, lang)
    tokens = chat_tokens(target, msgs) + target.tokenize(prefix, special=False)
    # The snippet's marker lines never appear in the answer: drafting them only wastes verifies.
    snippet = "\n".join(ln for ln in update_lf.splitlines() if not MARKER.match(ln))
    merged_ref, orig_ref = edit_references(
        original_lf, update_lf, None if merged is None else merged.replace("\r\n", "\n")
    )
    budget = max_tokens or int(len(target.tokenize(original_lf + update_lf)) * 1.3) + 64
    markers = snippet_markers(original_lf, update_lf, detect_language(lang))
    line_guard: Guard | None = None
    guard = guard_mode(guard)
    if guard in ("lines", "order"):
        own = set(markers)  # the snippet's markers the original lacks
        marked = [(ln, bool(MARKER.match(ln)) or ln.strip() in own) for ln in update_lf.split("\n")]
        aligned: list[tuple[int, int]] = []
        follows: list[tuple[int, bytes, int]] = []
        if guard == "order":
            merge = merge or structural_merge(original_lf, update_lf, lang)
            aligned = context_pairs(original_lf, update_lf, merge)
            follows = hunk_follows(original_lf, merge)
        line_guard = lines_guard(
            original_lf,
            marked,
            stop,
            target.token_bytes,
            target.n_vocab,
            target.vocab.fingerprint,
            order=guard == "order",
            aligned=aligned,
            follows=follows,
        )
    elif guard == "markers":
        line_guard = apply_guard(
            original_lf,
            lambda t: target.token_bytes(t).decode("utf-8", "ignore"),
            target.n_vocab,
            target.vocab.fingerprint,
            markers,
        )
    return ApplyPlan(
        original=original,
        template=tpl,
        tokens=tokens,
        prefix=prefix,
        stop=stop,
        references=(merged_ref, orig_ref, Reference(snippet)),
        budget=budget,
        merged=merged_ref.text,
        guard=line_guard,
        markers=markers,
    )


def guard_mode(guard: str | bool) -> GuardMode:
    """A guard mode from user input (True is the default guard, `order`; False is `off`)."""
    mode = ("order" if guard else "off") if isinstance(guard, bool) else guard
    for known in GUARD_MODES:
        if mode == known:
            return known
    raise UserError(f"unknown guard {guard!r}: use one of {', '.join(GUARD_MODES)}")


def check_policy(on_lazy: str) -> None:
    if on_lazy not in LAZY_POLICIES:
        raise UserError(f"unknown on_lazy {on_lazy!r}: use one of {', '.join(LAZY_POLICIES)}")


def _lazy_policy(
    res: ApplyResult, policy: LazyPolicy, original: str, merged: str, markers: tuple[str, ...] = ()
) -> ApplyResult:
    """Apply `policy` to an answer with elided code: keep it, use `merged` (the naive merge, LF
    line ends), or refuse."""
    res.lazy_lines = lazy_lines(res.text, original, markers)
    if not res.lazy_lines or policy == "keep" or res.stats.finish_reason == "cancelled":
        return res
    where = ", ".join(map(str, res.lazy_lines[:8])) + (" ..." if len(res.lazy_lines) > 8 else "")
    if policy == "error":
        raise UserError(
            f"the model left {len(res.lazy_lines)} '... existing code ...' marker(s) "
            f"in the merged file (line {where}), so code would be lost; use a model "
            "trained for apply, or accept the naive merge (on_lazy='naive')"
        )
    res.text = merged.replace("\n", "\r\n") if "\r\n" in original else merged
    res.fallback = "naive"
    return res

"""The target chooses among the placements the snippet allows, before writing anything.

When the merge is unsure of a hunk, the readings it hesitates between mostly differ in where
the hunk's span ends (`apply.readings`). Each reading is a whole file; the answer check keeps
those the snippet and the original allow. Where more than one is left, the target scores each
by its log-likelihood over a window around the hunk, as code after a code fence (the snippet's
lines are in every reading: how the file reads where they differ is what tells them apart) or as
the answer to the apply prompt for that window: one forward over the reading's tokens, as
speculative verification does with the candidate as the draft. The winner answers when it
leads the runner-up by a clear margin; else nothing is chosen and the model writes the window
itself. Choosing among fixed texts decides no token of a generation, so decoding stays
lossless.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge_spec.apply.merge import Edit, MergeResult, assemble, split_original
from edge_spec.apply.plan import plan_apply
from edge_spec.apply.readings import readings
from edge_spec.apply.region import piece, snippet_part
from edge_spec.config.settings import ApplySettings
from edge_spec.runtimes.base import Runtime
from edge_spec.runtimes.prefix import prefill

_ROWS = 64  # logits rows per forward: a row is the whole vocabulary


@dataclass(frozen=True)
class HunkChoice:
    """The placements of one unsure hunk the check allows, and how the target scored them."""

    hunk: int
    edits: tuple[Edit, ...]
    scores: tuple[float, ...] = ()

    @property
    def margin(self) -> float:
        """The winner's lead over the runner-up (infinite with one candidate)."""
        top = sorted(self.scores, reverse=True)
        return top[0] - top[1] if len(top) > 1 else float("inf")

    @property
    def winner(self) -> Edit:
        return self.edits[int(np.argmax(self.scores))] if self.scores else self.edits[0]


def allowed(
    original: str, update: str, merge: MergeResult, settings: ApplySettings
) -> list[HunkChoice] | None:
    """Per unsure hunk, its placements the answer check passes (`apply.readings`; the others'
    as the merge put them); None when some hunk has none, or over `choose_max`."""
    out = []
    for h in merge.hunks:
        if h.status == "exact":
            continue
        ok = readings(original, update, merge, h.index, settings.choose_reach, settings.choose_max)
        if not ok or len(ok) > settings.choose_max:
            return None
        out.append(HunkChoice(h.index, tuple(ok)))
    return out


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def _parted(toks: Sequence[Sequence[int]]) -> tuple[int, int]:
    """The tokens all texts share at their head, and at their tail past the head."""
    shared = min(_lcp(toks[0], t) for t in toks)
    ends = [t[shared:][::-1] for t in toks]
    return shared, min(_lcp(ends[0], e) for e in ends)


def score_texts(
    rt: Runtime, prompt: Sequence[int], texts: Sequence[str], tail: int | None = None
) -> list[float]:
    """The target's log-likelihood of each text as the continuation of `prompt`, counted from
    the first token where they part (the shared head scores alike for all) to `tail` tokens
    into the tail they share again (None: to the end). How a reading rejoins the file tells
    the readings apart; the target's view of lines further on barely depends on it, and each
    token scored costs a forward's share on a CPU. The texts are scored in sorted order, each
    from where it parts from the one before (its head's log-likelihoods and cache reused)."""
    toks = [rt.tokenize(t, special=False) for t in texts]
    shared, suffix = _parted(toks)
    cut = suffix - tail if tail is not None and suffix > tail else 0
    # The prompt on its own first, as a generation from it would prefill it: a window the
    # target then writes from the same prompt reuses it whole (`runtimes.prefix`).
    prefill(rt, list(prompt[:-1]))
    n = len(prompt)
    head = [*prompt[-1:], *toks[0][:shared]][:-1]
    if head:
        rt.eval(head, rows=[])
    out = [0.0] * len(toks)
    prev: list[int] = []
    prev_lp: list[float] = []
    for i in sorted(range(len(toks)), key=lambda k: toks[k]):
        t = toks[i]
        stop = len(t) - cut
        start = max(shared, min(_lcp(prev, t), len(prev_lp) + shared))
        lp = prev_lp[: start - shared]
        rt.truncate(n + start - 1)
        full = [*prompt, *t]
        for at in range(start, stop, _ROWS):
            end = min(at + _ROWS, stop)
            logits = np.asarray(
                rt.eval(full[n + at - 1 : n + end - 1], rows=list(range(end - at))),
                dtype=np.float64,
            )
            top = logits.max(axis=1, keepdims=True)
            logz = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
            lp += [float(logits[k, t[at + k]] - logz[k]) for k in range(end - at)]
        out[i] = float(sum(lp))
        prev, prev_lp = t, lp
    return out


def _window(merge: MergeResult, choice: HunkChoice, n: int, reach: int) -> tuple[int, int]:
    """Original lines [a, b) around every placement of the hunk, grown over any other edit it
    cuts, so each candidate's window text is that of the whole file."""
    a = max(0, min(e.start for e in choice.edits) - reach)
    b = min(n, max(e.end for e in choice.edits) + reach)
    for i, e in enumerate(merge.edits):
        if i != choice.hunk and e.start < b and e.end > a or a < e.start == e.end < b:
            a, b = min(a, e.start), max(b, e.end)
    return a, b


def window_texts(
    olines: Sequence[str],
    merge: MergeResult,
    window: tuple[int, int],
    hunks: Sequence[int],
    choice: HunkChoice,
) -> list[str]:
    """Original lines [a, b) with `hunks` applied, once per placement of `choice`'s hunk (the
    others as the merge put them)."""
    a, b = window
    return [
        "".join(
            ln + "\n"
            for ln in piece(
                olines, a, b, [e if i == choice.hunk else merge.edits[i] for i in hunks]
            )
        )
        for e in choice.edits
    ]


def choose(
    rt: Runtime,
    original: str,
    update: str,
    merge: MergeResult,
    choices: Sequence[HunkChoice],
    settings: ApplySettings,
    lang: str = "",
    instruction: str | None = None,
) -> list[HunkChoice]:
    """Each hunk's placements scored by the target in a window around them."""
    olines, _, _ = split_original(original)
    slines = update.replace("\r\n", "\n").split("\n")
    out = []
    for c in choices:
        if len(c.edits) == 1:
            out.append(c)
            continue
        a, b = _window(merge, c, len(olines), settings.choose_context)
        inside = [i for i, e in enumerate(merge.edits) if a <= e.start and e.end <= b]
        texts = window_texts(olines, merge, (a, b), inside, c)
        if settings.choose_prompt == "code":
            prompt = rt.tokenize(f"```{lang}\n", special=False)
        else:
            window = "".join(ln + "\n" for ln in olines[a:b])
            plan = plan_apply(
                rt, window, snippet_part(slines, merge, inside), instruction, lang=lang, guard="off"
            )
            stop = plan.stop[0] if plan.stop else ""
            # The answer ends where the stop string takes the window's last newline.
            prompt, texts = plan.tokens, [t[:-1] + stop for t in texts]
        scores = score_texts(rt, prompt, texts, settings.choose_tail)
        out.append(HunkChoice(c.hunk, c.edits, tuple(scores)))
    return out


def chosen_text(original: str, merge: MergeResult, choices: Sequence[HunkChoice]) -> str:
    """The file with each hunk at its winning placement."""
    olines, eol, final = split_original(original)
    win = {c.hunk: c.winner for c in choices}
    lines = assemble(olines, [win.get(i, e) for i, e in enumerate(merge.edits)])
    return eol.join(lines) + (eol if final else "")


def choice_record(scored: Sequence[HunkChoice], chosen: bool, ms: float) -> list[dict[str, Any]]:
    """What a result reports of a choice: per hunk its readings, winner, lead, and the time."""
    return [
        {
            "hunk": c.hunk + 1,
            "candidates": len(c.edits),
            "lines": [c.winner.start + 1, c.winner.end],
            "margin": round(c.margin, 3),
            "chosen": chosen,
            "ms": round(ms, 1),
        }
        for c in scored
    ]


def narrow_leads(scored: Sequence[HunkChoice], warn: float) -> list[str]:
    """A warning per hunk whose winner leads by less than `warn` nats."""
    return [
        f"hunk {c.hunk + 1} went to original lines {c.winner.start + 1}-{c.winner.end}, "
        f"the target's choice among {len(c.edits)} placements by a narrow lead "
        f"({c.margin:.1f} nats): check it"
        for c in scored
        if c.margin < warn
    ]

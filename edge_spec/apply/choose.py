"""The target chooses among the placements the snippet allows, before writing anything.

When the merge is unsure of a hunk, the readings it hesitates between mostly differ in where
the hunk's span ends (`merge.candidates`). Each reading is a whole file; the answer check keeps
those the snippet and the original allow. Where more than one is left, the target scores each
by its log-likelihood as the answer to the apply prompt of a window around the hunk (the
window's original lines as the file, the hunk's snippet lines as the edit): one forward over
the candidate's tokens, as speculative verification does with the candidate as the draft. The
winner answers when it leads the runner-up by a clear margin; else nothing is chosen and the
model writes the window itself. Choosing among fixed texts decides no token of a generation,
so decoding stays lossless.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edge_spec.apply.check.verdict import unplaced_changes
from edge_spec.apply.merge import Edit, MergeResult, assemble, split_original
from edge_spec.apply.merge.candidates import (
    alternative_edits,
    doubts_where,
    relocated_edits,
    to_file_ends,
)
from edge_spec.apply.plan import plan_apply
from edge_spec.apply.region import snippet_part
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


def _text(lines: Sequence[str], eol: str, final: bool) -> str:
    return eol.join(lines) + (eol if final else "")


def _content(text: str) -> tuple[str, ...]:
    """A file's non-blank lines, whitespace runs collapsed: what the check tells apart."""
    return tuple(" ".join(ln.split()) for ln in text.splitlines() if ln.strip())


def allowed(
    original: str, update: str, merge: MergeResult, settings: ApplySettings
) -> list[HunkChoice] | None:
    """Per unsure hunk, its placements the answer check passes (the others' as the merge put
    them), one per distinct content (the one nearest the merge's span: placements that differ
    only in blank lines score alike); None when some hunk has none, or over `choose_max`."""
    olines, eol, final = split_original(original)
    out = []
    for h in merge.hunks:
        if h.status == "exact":
            continue
        own = merge.edits[h.index]
        alts = sorted(
            alternative_edits(merge, h.index, len(olines), settings.choose_reach),
            key=lambda e: abs(e.start - own.start) + abs(e.end - own.end),
        )
        if doubts_where(h.reason):
            alts += relocated_edits(merge, h.index, olines)
        alts += to_file_ends(merge, h.index, len(olines), h.reason)
        seen: set[tuple[str, ...]] = set()
        ok: list[Edit] = []
        for e in alts:
            edits = [e if i == h.index else x for i, x in enumerate(merge.edits)]
            text = _text(assemble(olines, edits), eol, final)
            if _content(text) in seen:
                continue
            seen.add(_content(text))
            if not unplaced_changes(original, update, text, merge):
                ok.append(e)
        if not ok or len(ok) > settings.choose_max:
            return None
        out.append(HunkChoice(h.index, tuple(ok)))
    return out


def score_texts(rt: Runtime, prompt: Sequence[int], texts: Sequence[str]) -> list[float]:
    """The target's log-likelihood of each text as the continuation of `prompt`, counted from
    the first token where they part (the shared head scores alike for all)."""
    toks = [rt.tokenize(t, special=False) for t in texts]
    shared = min(len(t) for t in toks)
    for t in toks[1:]:
        shared = min(
            shared,
            next((i for i, (a, b) in enumerate(zip(toks[0], t, strict=False)) if a != b), shared),
        )
    base = list(prompt) + toks[0][:shared]
    prefill(rt, base[:-1])
    out = []
    for t in toks:
        rt.truncate(len(base) - 1)
        feed, want = [base[-1], *t[shared:]], t[shared:]
        total = 0.0
        for at in range(0, len(want), _ROWS):
            rows = list(range(at, min(at + _ROWS, len(want))))
            logits = np.asarray(
                rt.eval(feed[at : rows[-1] + 1], rows=[r - at for r in rows]), dtype=np.float64
            )
            top = logits.max(axis=1, keepdims=True)
            logz = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
            total += float(sum(logits[k, want[r]] - logz[k] for k, r in enumerate(rows)))
        out.append(total)
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
        texts = []
        for e in c.edits:
            edits = [
                Edit(x.start - a, x.end - a, x.lines)
                for x in (e if i == c.hunk else merge.edits[i] for i in inside)
            ]
            texts.append("".join(ln + "\n" for ln in assemble(olines[a:b], edits)))
        window = "".join(ln + "\n" for ln in olines[a:b])
        plan = plan_apply(
            rt, window, snippet_part(slines, merge, inside), instruction, lang=lang, guard="off"
        )
        stop = plan.stop[0] if plan.stop else ""
        # The answer ends where the stop string takes the window's last newline.
        scores = score_texts(rt, plan.tokens, [t[:-1] + stop for t in texts])
        out.append(HunkChoice(c.hunk, c.edits, tuple(scores)))
    return out


def chosen_text(original: str, merge: MergeResult, choices: Sequence[HunkChoice]) -> str:
    """The file with each hunk at its winning placement."""
    olines, eol, final = split_original(original)
    win = {c.hunk: c.winner for c in choices}
    return _text(assemble(olines, [win.get(i, e) for i, e in enumerate(merge.edits)]), eol, final)

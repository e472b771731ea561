"""The target chooses inside the windows the model would rewrite, with the prompt it would get.

When the merge's unsure hunks go by region (`apply.region`), each window's apply prompt (the
window as the file, the snippet lines of its hunks as the edit) is the prompt the model writes
the window from. The readings of the window's unsure hunks are scored as answers to that very
prompt (`apply.choose.score_texts`). A window whose every unsure hunk has a clear winner is
settled with the winners; the model writes the others, and the prompt of the last window scored
is still in the KV cache, so its prefill is not paid twice (`runtimes.prefix`). Choosing among
fixed texts decides no token of a generation: decoding stays lossless.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from edge_spec.apply.choose import HunkChoice, score_texts, window_texts
from edge_spec.apply.merge import MergeResult, split_original
from edge_spec.apply.plan import plan_apply
from edge_spec.apply.readings import readings
from edge_spec.apply.region import RegionPlan, Window, piece
from edge_spec.config.settings import ApplySettings
from edge_spec.runtimes.base import Runtime


@dataclass(frozen=True)
class WindowChoice:
    """A window and its unsure hunks' placements, as scored by the target."""

    window: Window
    hunks: tuple[HunkChoice, ...]

    def clear(self, margin: float) -> bool:
        return all(c.margin >= margin for c in self.hunks)


def window_readings(
    original: str, update: str, merge: MergeResult, plan: RegionPlan, settings: ApplySettings
) -> list[WindowChoice] | None:
    """The windows the target can choose in: each unsure hunk of theirs keeps two to
    `choose_max` placements the answer check passes, all inside the window. None when some
    hunk's placements reach outside its window: only a window of their own can tell them
    apart (`apply.choose`)."""
    out = []
    for w in plan.windows:
        hunks: list[HunkChoice] = []
        for i in w.hunks:
            if merge.hunks[i].status == "exact":
                continue
            ok = readings(original, update, merge, i, settings.choose_reach, settings.choose_max)
            if not 2 <= len(ok) <= settings.choose_max:
                hunks = []  # one reading left is the check's, not the target's choice
                break
            if any(e.start < w.start or e.end > w.end for e in ok):
                return None
            hunks.append(HunkChoice(i, tuple(ok)))
        if hunks:
            out.append(WindowChoice(w, tuple(hunks)))
    return out


def score_windows(
    rt: Runtime,
    original: str,
    merge: MergeResult,
    choices: Sequence[WindowChoice],
    settings: ApplySettings,
    lang: str = "",
    instruction: str | None = None,
    template: str | None = None,
) -> list[WindowChoice]:
    """Each window's unsure hunks scored as answers to the window's apply prompt."""
    olines, _, _ = split_original(original)
    out = []
    for wc in choices:
        w = wc.window
        plan = plan_apply(rt, w.original, w.snippet, instruction, template=template, lang=lang)
        stop = plan.stop[0] if plan.stop else ""
        scored = []
        for c in wc.hunks:
            # The answer ends where the stop string takes the window's last newline.
            texts = window_texts(olines, merge, (w.start, w.end), w.hunks, c)
            texts = [t[:-1] + stop for t in texts]
            scores = score_texts(rt, plan.tokens, texts, settings.choose_tail)
            scored.append(replace(c, scores=tuple(scores)))
        out.append(WindowChoice(w, tuple(scored)))
    return out


def settled(
    original: str, plan: RegionPlan, merge: MergeResult, chosen: Sequence[WindowChoice]
) -> RegionPlan:
    """The plan with each chosen window turned into settled text: its hunks at their winners."""
    olines, _, _ = split_original(original)
    win = {c.hunk: c.winner for wc in chosen for c in wc.hunks}
    done = {wc.window.start for wc in chosen}
    segments = [
        tuple(piece(olines, s.start, s.end, [win.get(i, merge.edits[i]) for i in s.hunks]))
        if isinstance(s, Window) and s.start in done
        else s
        for s in plan.segments
    ]
    return replace(plan, segments=tuple(segments))

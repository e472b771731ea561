"""Apply by region: the model rewrites only a window around each hunk the merge is unsure of.

When the structural merge places every hunk but is not sure of some, most of the file is still
settled: the lines outside the unsure hunks are the original's, with the sure hunks applied.
`plan_regions` cuts the original into segments: settled text, and windows of context lines
around each unsure hunk. The model is prompted with a window as if it were the whole file and
the snippet lines of that window's hunks as the edit, so prompts are a fraction of the file and
outputs a fraction of the file's tokens. A sure hunk that overlaps a window goes into it, so
no line is written twice.

Regions are not used when a hunk is unplaced (where it goes is unknown, so no window can be
cut), or when the windows would cover most of the file anyway (then the whole file is
rewritten, which gives the model all the context it could want).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from edge_spec.apply.check.verdict import unsure_guess
from edge_spec.apply.clean import lazy_lines
from edge_spec.apply.merge import Edit, MergeResult, assemble, split_original
from edge_spec.apply.merge.markers import marker_shape, snippet_markers
from edge_spec.apply.plan import ApplyResult
from edge_spec.apply.readings import readings
from edge_spec.config.settings import ApplySettings
from edge_spec.core.stats import Stats


@dataclass(frozen=True)
class Window:
    """Original lines [start, end) the model rewrites, applying hunks `hunks` of the snippet."""

    start: int
    end: int
    hunks: tuple[int, ...]
    original: str  # the window's original lines (LF, final newline)
    snippet: str  # the snippet lines of its hunks, with the markers around them
    merged: str  # the merge's text for the window: the drafting reference
    # Whether the window holds every placement of its unsure hunks that the answer check allows
    # (the merge's own among them): then the model was free to write any, and an answer equal
    # to the merge's there is the target's own, not a copy of the guess (drafts never decide a
    # token: decoding is lossless).
    holds_all: bool = False


@dataclass(frozen=True)
class RegionPlan:
    """The file as settled text (LF lines) and windows, in order."""

    segments: tuple[tuple[str, ...] | Window, ...]
    eol: str
    final: bool  # whether the original ends with a newline
    markers: tuple[str, ...] = ()  # the snippet's marker lines the original does not have
    merge: MergeResult | None = None  # the merge the plan was cut from (its verdicts)

    @property
    def windows(self) -> list[Window]:
        return [s for s in self.segments if isinstance(s, Window)]


def plan_regions(
    original: str, snippet: str, merge: MergeResult, settings: ApplySettings, force: bool = False
) -> RegionPlan | None:
    """The region plan for a merge with unsure hunks; None when regions do not apply.

    `force` (the file does not fit the model's context) skips the share limit.
    """
    if merge.exact or not merge.hunks or len(merge.edits) != len(merge.hunks):
        return None
    if any(h.status == "unplaced" or h.original_span is None for h in merge.hunks):
        return None
    olines, eol, final = split_original(original)
    unsure = [h.index for h in merge.hunks if h.status != "exact"]
    spans = [(e.start, e.end) for e in merge.edits]
    reach, n = settings.region_context, len(olines)
    ext = list(spans)
    for i in unsure:
        ext[i] = _extent(original, snippet, merge, settings, i)
    wins = _closed(
        [(max(0, ext[i][0] - reach), min(n, ext[i][1] + reach), [i]) for i in unsure], spans
    )
    # Moving edges to statement starts can reach into another hunk: close over it again.
    wins = _closed([_edges(olines, ext, w, reach) for w in wins], spans)
    covered = sum(b - a for a, b, _ in wins)
    if not force and covered > settings.region_max_share * max(1, len(olines)):
        return None
    slines = snippet.replace("\r\n", "\n").split("\n")
    used = {i for _, _, hunks in wins for i in hunks}
    segments: list[tuple[str, ...] | Window] = []
    bounds = [0, *(x for a, b, _ in wins for x in (a, b)), len(olines)]
    for k in range(0, len(bounds), 2):
        lo, hi = bounds[k], bounds[k + 1]
        # Settled text [lo, hi] takes the sure edits inside it, insertions at its ends included.
        mine = [i for i, (a, b) in enumerate(spans) if i not in used and lo <= a and b <= hi]
        used.update(mine)
        if hi > lo or mine:
            segments.append(tuple(piece(olines, lo, hi, [merge.edits[i] for i in mine])))
        if k // 2 < len(wins):
            a, b, hunks = wins[k // 2]
            edits = [merge.edits[i] for i in hunks]
            segments.append(
                Window(
                    a,
                    b,
                    tuple(hunks),
                    _text(olines[a:b]),
                    snippet_part(slines, merge, hunks),
                    _text(piece(olines, a, b, edits)),
                    _holds_all(original, snippet, merge, settings, (a, b, hunks)),
                )
            )
    if len(used) != len(spans):
        return None  # an edit fits neither a window nor settled text: never drop it
    return RegionPlan(
        tuple(segments), eol, final, snippet_markers(original, snippet, merge.language), merge
    )


def _extent(
    original: str, snippet: str, merge: MergeResult, settings: ApplySettings, hunk: int
) -> tuple[int, int]:
    """Original lines [lo, hi) a window around `hunk` must hold: its span, grown over the
    hunk's other readings (`apply.readings`) when there are few and all lie within twice
    `region_context` lines of it (its context repeats nearby). Then the target chooses among
    them with the window's prompt, and the model writing the window is free to write any."""
    lo, hi = merge.edits[hunk].start, merge.edits[hunk].end
    ok = readings(original, snippet, merge, hunk, settings.choose_reach, settings.choose_max)
    far = 2 * settings.region_context
    if not ok or len(ok) > settings.choose_max:
        return lo, hi
    if any(e.start < lo - far or e.end > hi + far for e in ok):
        return lo, hi
    return min(lo, *(e.start for e in ok)), max(hi, *(e.end for e in ok))


def _holds_all(
    original: str,
    snippet: str,
    merge: MergeResult,
    settings: ApplySettings,
    win: tuple[int, int, Sequence[int]],
) -> bool:
    a, b, hunks = win
    for i in hunks:
        if merge.hunks[i].status == "exact":
            continue
        ok = readings(original, snippet, merge, i, settings.choose_reach)
        if merge.edits[i] not in ok or any(e.start < a or e.end > b for e in ok):
            return False
    return True


def _base(olines: Sequence[str], spans: Sequence[tuple[int, int]], hunks: Sequence[int]) -> int:
    """The least indentation of the original lines the hunks replace."""
    lines = [ln for i in hunks for ln in olines[spans[i][0] : spans[i][1]] if ln.strip()]
    return min((len(ln) - len(ln.lstrip()) for ln in lines), default=0)


def _cut(olines: Sequence[str], at: int, inner: int, step: int, reach: int, base: int) -> int:
    """A window edge near `at` where a statement at the hunks' depth (indent <= `base`) starts
    after a blank line: outwards by up to `reach` lines, else inwards down to `inner` (the
    hunks' own edge), else `at`. A window cut inside a statement leaves the model a fragment
    to complete, and it writes past the window's end to complete it."""
    n = len(olines)
    outwards = range(at, at + step * (reach + 1), step)
    for i in [*outwards, *range(at - step, inner - step, -step)]:
        if i <= 0 or i >= n:
            if i in outwards:
                return max(0, min(n, i))
            continue
        line = olines[i]
        if not olines[i - 1].strip() and line.strip() and len(line) - len(line.lstrip()) <= base:
            return i
    return at


def _edges(
    olines: Sequence[str],
    spans: Sequence[tuple[int, int]],
    win: tuple[int, int, list[int]],
    reach: int,
) -> tuple[int, int, list[int]]:
    """The window's edges at statement starts (`_cut`), without blank lines at its ends: models
    drop those from answers, so they go to the settled text."""
    a, b, hunks = win
    lo, hi = min(spans[i][0] for i in hunks), max(spans[i][1] for i in hunks)
    base = _base(olines, spans, hunks)
    a, b = _cut(olines, a, lo, -1, reach, base), _cut(olines, b, hi, 1, reach, base)
    while a < lo and not olines[a].strip():
        a += 1
    while b > hi and not olines[b - 1].strip():
        b -= 1
    return a, b, hunks


def _windows_merged(wins: Sequence[tuple[int, int, list[int]]]) -> list[tuple[int, int, list[int]]]:
    out: list[tuple[int, int, list[int]]] = []
    for a, b, h in sorted(wins):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b), sorted({*out[-1][2], *h}))
        else:
            out.append((a, b, h))
    return out


def _closed(
    wins: Sequence[tuple[int, int, list[int]]], spans: Sequence[tuple[int, int]]
) -> list[tuple[int, int, list[int]]]:
    """Windows merged where they touch, each grown over every hunk it cuts, until stable."""
    out = _windows_merged(wins)
    while True:
        grown = _windows_merged([_swallow(w, spans) for w in out])
        if grown == out:
            return out
        out = grown


def _swallow(
    win: tuple[int, int, list[int]], spans: Sequence[tuple[int, int]]
) -> tuple[int, int, list[int]]:
    """The window grown over every hunk it overlaps (an insertion strictly inside counts)."""
    lo, hi, hunks = win
    cut = [
        i
        for i, (a, b) in enumerate(spans)
        if i not in hunks and (a < hi and b > lo or a == b and lo < a < hi)
    ]
    if not cut:
        return win
    return (
        min(lo, *(spans[i][0] for i in cut)),
        max(hi, *(spans[i][1] for i in cut)),
        sorted([*hunks, *cut]),
    )


def piece(olines: Sequence[str], lo: int, hi: int, edits: Sequence[Edit]) -> list[str]:
    """Original lines [lo, hi) with `edits` (in file positions, all inside) applied."""
    shifted = [Edit(e.start - lo, e.end - lo, e.lines) for e in edits]
    return assemble(olines[lo:hi], shifted)


def _text(lines: Sequence[str]) -> str:
    return "".join(ln + "\n" for ln in lines)


def snippet_part(slines: Sequence[str], merge: MergeResult, hunks: Sequence[int]) -> str:
    """The snippet lines of `hunks`, with the marker line before and after when there is one."""
    lo = merge.hunks[hunks[0]].snippet_span[0] - 1
    hi = merge.hunks[hunks[-1]].snippet_span[1]
    if lo > 0 and marker_shape(slines[lo - 1]):
        lo -= 1
    if hi < len(slines) and marker_shape(slines[hi]):
        hi += 1
    return _text(slines[lo:hi])


Delta = Callable[[str], None]
# Runs the model on one window (its text as the whole file, its snippet part as the edit).
RunWindow = Callable[[Window, "Delta | None"], ApplyResult]


def run_regions(
    plan: RegionPlan, run_window: RunWindow, on_delta: Delta | None, original: str
) -> ApplyResult:
    """Write the file segment by segment: settled text as is, each window by the model.

    Streamed deltas are the final text in order: a window's deltas are the model's, and what
    its answer's cleaning adds at the end (a final newline) follows them.
    """
    emit = on_delta if on_delta is None or plan.eol == "\n" else _crlf(on_delta)
    pieces: list[str] = []
    done: list[tuple[Window, ApplyResult]] = []
    for k, seg in enumerate(plan.segments):
        end = k == len(plan.segments) - 1 and not plan.final
        if not isinstance(seg, Window):
            text = _text(seg)
            text = text[:-1] if end and text else text
            if emit is not None and text:
                emit(text)
            pieces.append(text)
            continue
        sent: list[str] = []

        def tee(d: str, out: Delta | None = emit, sent: list[str] = sent) -> None:
            sent.append(d)
            if out is not None:
                out(d)

        res = run_window(seg, None if emit is None else tee)
        text = res.text[:-1] if end and res.text.endswith("\n") else res.text
        streamed = "".join(sent)
        if emit is not None and len(text) > len(streamed) and text.startswith(streamed):
            emit(text[len(streamed) :])
        pieces.append(text)
        done.append((seg, res))
        if res.stats.finish_reason == "cancelled":
            break
    return _result("".join(pieces), plan, done, original)


def _crlf(on_delta: Delta) -> Delta:
    def out(d: str) -> None:
        on_delta(d.replace("\n", "\r\n"))

    return out


def _result(
    text: str, plan: RegionPlan, done: Sequence[tuple[Window, ApplyResult]], original: str
) -> ApplyResult:
    if plan.eol == "\r\n":
        text = text.replace("\n", "\r\n")
    parts = [r for _, r in done]
    res = ApplyResult(
        text=text,
        raw="".join(r.raw for r in parts),
        stats=combine_stats([r.stats for r in parts]),
        template=parts[0].template if parts else "",
        engine="region",
        extra={"tokens": [t for r in parts for t in r.extra.get("tokens", [])]},
    )
    res.lazy_lines = lazy_lines(text, original, plan.markers)
    res.fallback = next((r.fallback for r in parts if r.fallback), None)
    if plan.merge is not None:
        res.suspect = [
            unsure_guess(f"the answer for lines {w.start + 1}-{w.end}", plan.merge, w.hunks)
            for w, r in done
            if r.text == w.merged and not w.holds_all
        ]
    res.regions = [
        {
            "lines": [w.start + 1, w.end],
            "hunks": [h + 1 for h in w.hunks],
            "prompt_tokens": r.stats.prompt_tokens,
            "output_tokens": r.stats.output_tokens,
        }
        for w, r in done
    ]
    return res


def combine_stats(parts: Sequence[Stats]) -> Stats:
    """One request's stats from its windows' generations."""
    if not parts:
        return Stats(draft="none", finish_reason="stop")
    reason = next((p.finish_reason for p in parts if p.finish_reason != "stop"), "stop")
    return Stats(
        prompt_tokens=sum(p.prompt_tokens for p in parts),
        cached_tokens=sum(p.cached_tokens for p in parts),
        output_tokens=sum(p.output_tokens for p in parts),
        prefill_ms=sum(p.prefill_ms for p in parts),
        decode_ms=sum(p.decode_ms for p in parts),
        ttft_ms=parts[0].ttft_ms,
        finish_reason=reason,
        draft=parts[0].draft,
        steps=[s for p in parts for s in p.steps],
    )

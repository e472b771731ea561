"""Placing one hunk of a snippet: its anchors, its edges, and how sure the placement is.

Anchors are pairs (hunk line, original line): the line chain (`anchors`) plus definitions,
closing brackets, block ends and statement keys (`pins`). Between two anchors the snippet's lines
replace the original's; outside them the open edges are settled by `edges.resolve`.

The output only depends on where the hunk starts and ends in the original, so a placement is
trusted (`exact`) when those two ends are certain: some anchor is unique in the window (a strong
context block, a definition name, a bracket or block whose opening line is anchored), no other
placement scores close, no alternative position of the outermost context block is structurally
viable, the gaps between anchors are plausible edits, and both edges are settled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Literal

from edge_spec.apply.merge.anchors import (
    anchor_lines,
    best_chain,
    find_blocks,
    indent_of,
    norm,
)
from edge_spec.apply.merge.context import WHOLE_FILE, Ctx, Edge
from edge_spec.apply.merge.doubts import blank_doubt, chain_doubts, gap_doubts, unmarked_doubts
from edge_spec.apply.merge.edges import resolve
from edge_spec.apply.merge.markers import Hunk
from edge_spec.apply.merge.outer import settle_outer
from edge_spec.apply.merge.pins import (
    Pair,
    appended_pairs,
    block_end,
    closer_pairs,
    confine,
    definition_matches,
    definition_pairs,
    file_end_pairs,
    key_anchor,
    merge_pairs,
    new_definitions,
    same,
)
from edge_spec.apply.merge.reorder import reordered
from edge_spec.apply.merge.structure import viable


@dataclass
class Env:
    """Where a hunk may go and what the hunks before it settled."""

    lo: int
    hi: int
    first: bool
    last: bool
    whole: bool
    snippet: list[str]
    is_marker: list[bool]
    texts: list[str | None]  # bracket-relevant code of each snippet line; None for markers
    matched: dict[int, int] = field(default_factory=dict)  # snippet line -> original line


# A hunk's verdict: placed for sure, placed with a doubt, or not placed at all.
HunkStatus = Literal["exact", "ambiguous", "unplaced"]


@dataclass(frozen=True)
class Placement:
    start: int
    end: int
    lines: tuple[str, ...]
    status: HunkStatus
    reason: str
    pairs: tuple[tuple[int, int], ...] = ()


def place(ctx: Ctx, hunk: Hunk, env: Env) -> Placement:
    """Place one hunk inside original [env.lo, env.hi) and say how sure that is."""
    if not any(ln.strip() for ln in hunk.lines):
        return Placement(
            env.lo,
            env.lo,
            (),
            "unplaced",
            "blank lines between two markers: formatting, or new lines whose place is unknown",
        )
    keys = [norm(ln) for ln in hunk.lines]
    matches = definition_matches(ctx, hunk, env.lo, env.hi)
    moved = reordered(ctx, hunk, matches)
    inside = confine([] if moved else matches, new_definitions(ctx, hunk))

    def pair_ok(j: int, i: int) -> bool:
        if moved and (moved[0] <= j <= moved[1] or moved[2] <= i <= moved[3]):
            return False  # the reordered stretch is replaced as one block
        return (
            not keys[j] or ctx.imap.apply(indent_of(hunk.lines[j])) == ctx.index.indents[i]
        ) and inside(j, i)

    blocks = find_blocks(keys, ctx.index, env.lo, env.hi, pair_ok)
    uniq = anchor_lines(keys, ctx.index)
    chain = best_chain(blocks, None, ctx.index, keys, uniq)
    pairs: list[Pair] = (
        []
        if chain is None
        else [(b.j + k, b.i + k, False) for b in chain.blocks for k in range(b.n)]
    )
    chained = {(j, i) for j, i, _ in pairs}
    if moved:
        j0, j1, i0, i1 = moved
        ends = [(j0, i0, True), (j1, i1, True)]
        pinned = "whole definitions given in another order" if merge_pairs(pairs, ends) else ""
    else:
        pinned = definition_pairs(ctx, hunk, matches, pairs)
    if closer_pairs(ctx, hunk, env.texts, env.matched, env.lo, env.hi, pairs):
        pinned = pinned or "anchored on brackets opened by anchored lines"
    appended = [] if matches or moved else appended_pairs(ctx, hunk, env.first, env.last, pair_ok)
    if appended:  # the chain's place, wherever it was, gives way
        pairs[:], chain = appended, None
        pinned = pinned or "after the file's last lines, the snippet's end unmarked"
    else:
        file_end_pairs(ctx, hunk, env.first, env.last, pairs, pair_ok)
    block = block_end(ctx, hunk, env.snippet, env.is_marker, env.matched)
    pins = frozenset((j, i) for j, i, _ in pairs) - chained
    if not pairs:
        return _without_pairs(ctx, hunk, env, block)
    doubts: list[str] = []
    s, j0 = _head(ctx, hunk, env, pairs, doubts)
    e, j1 = _tail(ctx, hunk, env, pairs, doubts, block)
    lines = _render(ctx, hunk, pairs, s, e, j0, j1)
    noop = lines == ctx.index.lines[s:e]
    doubts += chain_doubts(ctx, hunk, keys, blocks, chain, env.lo, env.hi, uniq, bool(pinned), noop)
    doubts += gap_doubts(ctx, hunk, keys, pairs, pins, env.lo, env.hi)
    shown = [j for j, ln in enumerate(hunk.lines) if ln.strip()]
    bounds = frozenset(
        [d.start for it, d in matches if it.start == shown[0]]
        + [d.end + 1 for it, d in matches if it.end == shown[-1]]
    )
    doubts += unmarked_doubts(ctx, hunk, env.first, env.last, s, e, bounds)
    return _verdict(
        ctx,
        s,
        e,
        lines,
        doubts,
        pinned or _why_sure(pairs),
        tuple((j, i) for j, i, forced in pairs if not forced),
    )


def _verdict(
    ctx: Ctx,
    s: int,
    e: int,
    lines: list[str],
    doubts: list[str],
    why: str,
    pairs: tuple[tuple[int, int], ...] = (),
) -> Placement:
    # Checked over the whole span, not per gap: an insertion of repeated structure aligns at
    # several equivalent offsets ("sliding"), and only the sum of the gaps is meaningful.
    if not viable(lines, ctx.index.lines[s:e], ctx.brackets, ctx.around(s, e)):
        doubts.append(f"original lines {s + 1}-{e} do not balance like their replacement")
    return Placement(
        s, e, tuple(lines), "ambiguous" if doubts else "exact", doubts[0] if doubts else why, pairs
    )


def _without_pairs(ctx: Ctx, hunk: Hunk, env: Env, block: tuple[int, int] | None) -> Placement:
    """A hunk with no context line: the end of an anchored block, or a keyed statement."""
    lines = list(hunk.lines)
    while not lines[0].strip():
        lines.pop(0)  # blank lines right after a marker are formatting
    if block is not None and env.lo <= block[1] <= env.hi:
        edge = resolve(ctx, lines, block[1], max(env.lo, block[0]), tail=False)
        s, e = block[1] - edge.take, block[1]
        doubts = [] if edge.sure else [edge.reason]
        why = "ends the block its marker is in"
    else:
        at = key_anchor(ctx, hunk, env.lo, env.hi)
        if at is None:  # no place: keep the snippet's order (a snippet's last hunk goes last)
            at = env.hi if (env.last and not hunk.marker_after) else env.lo
            return Placement(
                at,
                at,
                tuple(ctx.out(ln) for ln in hunk.lines),
                "unplaced",
                "no line of the hunk matches the original",
            )
        edge = resolve(ctx, lines, at, env.hi, tail=True)
        s, e = at, at + edge.take
        doubts = [] if edge.sure and edge.take else [edge.reason or "no context"]
        why = "its statements modify the ones with the same keys"
    doubts += unmarked_doubts(ctx, hunk, env.first, env.last, s, e)
    return _verdict(ctx, s, e, _fill(ctx, lines, ctx.index.lines[s:e]), doubts, why)


def _why_sure(pairs: list[Pair]) -> str:
    return f"anchored on unique context ({sum(1 for p in pairs if not p[2])} matching lines)"


def _trim_blanks(ctx: Ctx, hunk: Hunk, pairs: list[Pair], tail: bool) -> None:
    """Drop blank-line anchors at an end of the pairs when changed lines lie beyond them: the
    blank line may as well be the new code's (the edge settles it, `edges._blank_run`)."""
    while len(pairs) > 1:
        j, i, forced = pairs[-1] if tail else pairs[0]
        beyond = hunk.lines[j + 1 :] if tail else hunk.lines[:j]
        if forced or ctx.index.keys[i] or not any(ln.strip() for ln in beyond):
            return
        pairs.pop(-1 if tail else 0)


def _extend(ctx: Ctx, hunk: Hunk, env: Env, pairs: list[Pair], step: int) -> None:
    """Grow the outermost anchor over neighbouring lines equal to the original's neighbours.

    Not onto blank lines that only lead to changed lines: whether such a blank line is the
    original's or belongs to the new code is for the edge to settle.
    """
    j, i, _ = pairs[0 if step < 0 else -1]
    j_anchor = j
    grown: list[Pair] = []
    while (
        0 <= j + step < len(hunk.lines)
        and env.lo <= i + step < env.hi
        and same(ctx, hunk.lines[j + step], i + step)
    ):
        j, i = j + step, i + step
        grown.append((j, i, False))
    rest = hunk.lines[j + 1 :] if step > 0 else hunk.lines[:j]
    while grown and not ctx.index.keys[grown[-1][1]] and any(ln.strip() for ln in rest):
        grown.pop()
        j = grown[-1][0] if grown else j_anchor
        rest = hunk.lines[j + 1 :] if step > 0 else hunk.lines[:j]
    if step < 0:
        pairs[:0] = grown[::-1]
    else:
        pairs += grown


def _slide(ctx: Ctx, hunk: Hunk, env: Env, pairs: list[Pair], tail: bool) -> Edge | None:
    """Un-slide trivial anchors (`)`, blank) into the edge if its outer lines then sit as context.

    Inserted code that ends like its neighbour (`)` and two blank lines) lets the context block
    grow over the new lines' end; giving those lines back to the edge shows where the new code
    goes. Returns the settled edge once the pairs are given back.
    """
    order = pairs[::-1] if tail else pairs
    lead = 0
    while (
        lead < len(order)
        and not order[lead][2]
        and ctx.index.trivial(ctx.index.keys[order[lead][1]])
        and (lead == 0 or abs(order[lead][1] - order[lead - 1][1]) == 1)
    ):
        lead += 1
    found: list[tuple[int, Edge, Sequence[str], int]] = []
    for u in range(min(lead + 1, len(order))):
        j, i, _ = order[u]
        edge = hunk.lines[j + 1 :] if tail else hunk.lines[:j]
        if not any(ln.strip() for ln in edge):
            continue
        edge_at = settle_outer(
            ctx,
            edge,
            i + 1 if tail else i,
            (env.hi - i - 1) if tail else (i - env.lo),
            tail,
            longer=False,
        )
        if edge_at is not None:
            found.append((u, edge_at, edge, i))
    sure = [f for f in found if f[1].sure]
    if not sure:
        return None  # let the edge's other readings (keys, new definitions) have their say
    # Shifted readings give the same text; the one with the most outer context is checked for
    # a longer match elsewhere (at a smaller shift that match is just this reading).
    u, edge_at, best, i = max(sure, key=lambda f: f[1].take)
    checked = settle_outer(
        ctx, best, i + 1 if tail else i, (env.hi - i - 1) if tail else (i - env.lo), tail
    )
    pairs[:] = pairs[: len(pairs) - u] if tail else pairs[u:]
    rival = next((f[1] for f in found if f[1].rival), None) or (
        checked if checked is not None and not checked.sure else None
    )
    return edge_at if rival is None else Edge(edge_at.take, False, rival.reason, True)


def _head(ctx: Ctx, hunk: Hunk, env: Env, pairs: list[Pair], doubts: list[str]) -> tuple[int, int]:
    """Where the hunk starts in the original, and its first hunk line that goes out."""
    _trim_blanks(ctx, hunk, pairs, False)
    _extend(ctx, hunk, env, pairs, -1)
    j, i, _ = pairs[0]
    if not any(ln.strip() for ln in hunk.lines[:j]):
        doubt = blank_doubt(ctx, env.lo, i, False, hunk.marker_before) if j else None
        doubts += [doubt] if doubt else []
        return i, j  # blank lines before the first anchor: formatting, or so we guess
    slid = _slide(ctx, hunk, env, pairs, False)
    if slid is not None:
        if not slid.sure:
            doubts.append(slid.reason)
        return pairs[0][1] - slid.take, 0
    literal = env.first and not hunk.marker_before  # the file's first line is its limit
    edge = resolve(ctx, hunk.lines[:j], i, env.lo, tail=False, whole=env.whole, literal=literal)
    if not edge.sure:
        doubts.append(edge.reason)
    return i - edge.take, 0


def _tail(
    ctx: Ctx,
    hunk: Hunk,
    env: Env,
    pairs: list[Pair],
    doubts: list[str],
    block: tuple[int, int] | None,
) -> tuple[int, int]:
    """Where the hunk ends in the original (exclusive), and its end in the hunk."""
    _trim_blanks(ctx, hunk, pairs, True)
    _extend(ctx, hunk, env, pairs, 1)
    j, i, _ = pairs[-1]
    if block is not None and i < block[1] <= env.hi:
        return block[1], len(hunk.lines)  # the hunk ends the block: up to its last line
    if not any(ln.strip() for ln in hunk.lines[j + 1 :]):
        doubt = (
            blank_doubt(ctx, i + 1, env.hi, True, hunk.marker_after)
            if j + 1 < len(hunk.lines)
            else None
        )
        doubts += [doubt] if doubt else []
        return i + 1, j + 1
    slid = _slide(ctx, hunk, env, pairs, True)
    if slid is not None:
        if not slid.sure:
            doubts.append(slid.reason)
        return pairs[-1][1] + 1 + slid.take, len(hunk.lines)
    literal = env.last and not hunk.marker_after  # the file's last line is its limit
    edge = resolve(
        ctx, hunk.lines[j + 1 :], i + 1, env.hi, tail=True, whole=env.whole, literal=literal
    )
    if not edge.sure:
        doubts.append(edge.reason)
    elif _opens_file(ctx, env, pairs) and _more_code(ctx, i + 1 + edge.take, env.hi):
        # A marker-free snippet that begins where the file begins and ends on new code reads
        # as the whole new file (the rest deleted) as well as a part of it (the rest kept).
        doubts.append(WHOLE_FILE)
    return i + 1 + edge.take, len(hunk.lines)


def _opens_file(ctx: Ctx, env: Env, pairs: list[Pair]) -> bool:
    """Whether the snippet has no marker and its first anchor is the file's first code line."""
    first = 0 if ctx.index.keys[0] else ctx.index.next_nonblank(0, 1)
    return not any(env.is_marker) and env.first and env.last and pairs[0][1] == first


def _more_code(ctx: Ctx, a: int, b: int) -> bool:
    """Whether original [a, b) holds a line that is neither blank nor a lone closer."""
    keys = ctx.index.keys[a:b]
    return any(k and not (k[0] in ")]}" and ctx.index.trivial(k)) for k in keys)


def _render(ctx: Ctx, hunk: Hunk, pairs: list[Pair], s: int, e: int, j0: int, j1: int) -> list[str]:
    """The output for original [s, e): hunk lines [j0, j1), context lines as the original has
    them (its whitespace), changed lines in the original's style."""
    out: list[str] = []
    pj, pi = j0, s
    for j, i, forced in pairs:
        out += _fill(ctx, hunk.lines[pj:j], ctx.index.lines[pi:i])
        out.append(
            ctx.out(hunk.lines[j]) if forced else _context(ctx.index.lines[i], hunk.lines[j], ctx)
        )
        pj, pi = j + 1, i + 1
    out += _fill(ctx, hunk.lines[pj:j1], ctx.index.lines[pi:e])
    return out


def _fill(ctx: Ctx, new: Sequence[str], old: Sequence[str]) -> list[str]:
    """Snippet lines for a replaced region, reusing the original's text where lines agree."""
    if not old or not new:
        return [ctx.out(ln) for ln in new]
    a = [(ctx.imap.apply(indent_of(ln)), norm(ln)) for ln in new]
    b = [(indent_of(ln), norm(ln)) for ln in old]
    out: list[str] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out += [_context(o, n, ctx) for o, n in zip(old[j1:j2], new[i1:i2], strict=True)]
        else:
            out += [ctx.out(ln) for ln in new[i1:i2]]
    return out


def _context(old: str, new: str, ctx: Ctx) -> str:
    """A context line as the original has it, unless the snippet spaces its text otherwise
    (an aligned `=>`, a tab inside the line): then that spacing is the edit, kept at the
    original's indentation. In a snippet whose tabs are the edit's (`Ctx.literal`), a line
    indented with tabs is written as the snippet has it."""
    text = new.strip()
    if ctx.literal and "\t" in indent_of(new) and new != old:
        return new if ctx.keep_trailing or not text else new.rstrip()
    return old if old.strip().lstrip("\ufeff") == text or not text else indent_of(old) + text

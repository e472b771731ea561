"""Doubts about a placed hunk: each is a reason its placement may not be the one meant.

A hunk is `exact` only when none applies: its context is pinned (unique) and no other placement
scores close, its outermost context could not sit elsewhere with a viable edit, a hunk that
changes nothing is not a deletion in disguise, its gaps are plausible edits, and an unmarked
snippet end does not stop a line or two short of the file's end.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from edge_spec.apply.merge.anchors import Block, Chain, best_chain, is_distinctive, norm
from edge_spec.apply.merge.context import Ctx
from edge_spec.apply.merge.markers import Hunk
from edge_spec.apply.merge.pins import Pair, same
from edge_spec.apply.merge.structure import statement_key, viable
from edge_spec.apply.merge.syntax import hunk_definitions

_MAX_DELETION = 50
_BLANK_REACH = 8


def blank_doubt(ctx: Ctx, a: int, b: int, tail: bool, marked: bool) -> str | None:
    """Why a blank line at a hunk's edge that the original lacks there is unsure: it is
    formatting, a new blank line, or a blank line further on (the lines between deleted).

    At an unmarked snippet end only the last reading counts: snippets often start or end with
    a stray blank line.
    """
    near = (
        ctx.index.keys[a : min(b, a + _BLANK_REACH)]
        if tail
        else ctx.index.keys[max(a, b - _BLANK_REACH) : b]
    )
    if any(not k for k in near):
        return "a blank line at the hunk's edge may be context further on (lines deleted)"
    return "a blank line next to a marker may be new or formatting" if marked else None


def _strong(ctx: Ctx, keys: Sequence[str], b: Block) -> bool:
    ids = [k for k in keys[b.j : b.j + b.n] if k and not ctx.index.trivial(k)]
    return any(is_distinctive(k) for k in ids) or len(ids) >= 2


def chain_doubts(
    ctx: Ctx,
    hunk: Hunk,
    keys: Sequence[str],
    blocks: Sequence[Block],
    chain: Chain | None,
    lo: int,
    hi: int,
    uniq: Sequence[tuple[int, int]],
    pinned: bool,
    noop: bool,
) -> list[str]:
    """Whether the chain's place is in doubt: not pinned by a unique strong block, rivalled by
    another placement, or (for a hunk that changes nothing where it sits) by one where it would
    change something."""
    if chain is None:
        return [] if pinned else ["only brackets or weak lines anchor the hunk"]
    out = _outer_doubts(ctx, hunk, keys, chain, lo, hi)
    alt = best_chain(blocks, (chain.start, chain.end), ctx.index, keys, uniq)
    if noop:  # a hunk that changes nothing is there to show a deletion, or is widened context
        out += _split_doubts(ctx, keys, chain, lo, hi)
        if alt is not None and alt.score >= 0.5 * chain.score:
            out.append(
                f"the hunk changes nothing here but would at original lines "
                f"{alt.start + 1}-{alt.end}"
            )
    if pinned:
        return out
    unique = [
        b
        for b in chain.blocks
        if _strong(ctx, keys, b) and len(ctx.index.count_run(keys[b.j : b.j + b.n], lo, hi)) == 1
    ]
    if not unique:
        b = max(chain.blocks, key=lambda x: x.w)
        n = len(ctx.index.count_run(keys[b.j : b.j + b.n], lo, hi))
        if noop and n == 1 and len(chain.blocks) == 1 and not out:
            # Context alone, found once, in one piece: it changes nothing, wherever it is read.
            return out
        return [f"context matches {n} places" if n > 1 else "only weak context lines match"]
    if alt is not None and alt.score >= 0.8 * chain.score:
        return [f"context also matches original lines {alt.start + 1}-{alt.end}"]
    return out


def _split_doubts(ctx: Ctx, keys: Sequence[str], chain: Chain, lo: int, hi: int) -> list[str]:
    """Whether the outer part of the first or last block, up to its first (from its last)
    unique line, also fits further out with the lines between deleted: repeated context such as
    `total += i` does not say where a deletion starts."""
    index = ctx.index
    for b, first in ((chain.blocks[0], True), (chain.blocks[-1], False)):
        run = keys[b.j : b.j + b.n]
        uniq = [
            t
            for t, k in enumerate(run)
            if k and not index.trivial(k) and len(index.occurrences(k, lo, hi)) == 1
        ] or [b.n - 1 if first else 0]
        cuts = range(1, uniq[0] + 1) if first else range(uniq[-1] + 1, b.n)
        for t in cuts:
            part = run[:t] if first else run[t:]
            if not any(part):
                continue
            top, bottom = (
                (max(lo, b.i - _MAX_DELETION), b.i)
                if first
                else (b.i + b.n, min(hi, b.i + b.n + _MAX_DELETION))
            )
            for a in index.count_run(part, top, bottom):
                g0, g1 = (a + t, b.i + t) if first else (b.i + t, a)
                gone = index.lines[g0:g1]
                if gone and viable([], gone, ctx.brackets) and not _cuts_definition(ctx, g0, g1):
                    return [
                        f"context at the hunk's edge also fits at original line {a + 1} "
                        f"(lines between deleted)"
                    ]
    return []


def _outer_doubts(
    ctx: Ctx, hunk: Hunk, keys: Sequence[str], chain: Chain, lo: int, hi: int
) -> list[str]:
    """Whether the first or last context block could sit elsewhere with a viable edit between it
    and the next block (repeated lines such as `x = 1` recur), also without its inner blank or
    trivial lines (those may as well be changed lines that happen to match here)."""
    bs = chain.blocks
    if len(bs) < 2:
        return []
    index = ctx.index
    for b, nb, first in ((bs[0], bs[1], True), (bs[-1], bs[-2], False)):
        block = keys[b.j : b.j + b.n]
        for t in range(b.n, 0, -1):  # the outer t lines of the block
            run = block[:t] if first else block[b.n - t :]
            rest = block[t:] if first else block[: b.n - t]
            if any(k and not index.trivial(k) for k in rest):
                break  # the block's own inner lines with identity pin it here
            if all(not k or index.trivial(k) for k in run):
                break
            # an alternative may overlap the neighbour block: blank lines after context often do
            span = (lo, nb.i + t) if first else (nb.i + nb.n - t, hi)
            here = b.i if first else b.i + b.n - t
            for a in index.count_run(run, max(0, span[0]), span[1]):
                if a == here or not _viable_at(ctx, hunk, keys, b, nb, first, t, a):
                    continue
                # The lines this placement replaces and the merge's keeps: as many as it
                # moves the block, from where its context stops running on.
                i = _run_on(ctx, keys, b, nb, first, t, a)[1]
                gone = (i, i + here - a) if first else (i - a + here, i)
                if not (_adds_definitions(ctx, hunk, b, nb, first) and _drops_unnamed(ctx, *gone)):
                    return [f"outer context also fits at original line {a + 1}"]
    return []


def _adds_definitions(ctx: Ctx, hunk: Hunk, b: Block, nb: Block, first: bool) -> bool:
    """Whether, past a marker, the merge reads block `b` and its neighbour as shown neighbours
    with only whole new definitions between them: the shape of a new definition placed
    between two. Without a marker the snippet is a literal excerpt, and where lines change
    between the blocks, the change may as well be read further off with code deleted."""
    marked = hunk.marker_before if first else hunk.marker_after
    if not marked or (nb.i != b.i + b.n if first else b.i != nb.i + nb.n):
        return False
    new = hunk.lines[b.j + b.n : nb.j] if first else hunk.lines[nb.j + nb.n : b.j]
    items = hunk_definitions(ctx.language, new) if any(ln.strip() for ln in new) else None
    return bool(items) and all(d.kind != "other" and d.complete for d in items or ())


def _drops_unnamed(ctx: Ctx, a: int, b: int) -> bool:
    """Whether original lines [a, b) hold a whole definition the snippet does not speak of
    (`Ctx.speaks_of`): a reading that deletes it without a word is no reading of a lazy
    snippet."""
    return any(a <= d.start and d.end < b and d.complete and not ctx.speaks_of(d) for d in ctx.defs)


def _run_on(
    ctx: Ctx, keys: Sequence[str], b: Block, nb: Block, first: bool, t: int, a: int
) -> tuple[int, int]:
    """Snippet and original positions where the outer `t` lines of block `b`, placed at
    original line `a`, stop matching on their way to the neighbour block (they may run on
    over lines changed here)."""
    okeys = ctx.index.keys
    if first:
        j, i = b.j + t, a + t
        while j < nb.j and i < nb.i and keys[j] == okeys[i]:
            j, i = j + 1, i + 1
        return j, i
    j, i = b.j + b.n - t, a
    while j > nb.j + nb.n and i > nb.i + nb.n and keys[j - 1] == okeys[i - 1]:
        j, i = j - 1, i - 1
    return j, i


def _viable_at(
    ctx: Ctx, hunk: Hunk, keys: Sequence[str], b: Block, nb: Block, first: bool, t: int, a: int
) -> bool:
    """Whether the outer `t` lines of block `b`, placed at original line `a`, leave a viable edit
    between them and the neighbour block."""
    j, i = _run_on(ctx, keys, b, nb, first, t, a)
    if first:
        return viable(ctx.mapped(hunk.lines[j : nb.j]), ctx.index.lines[i : nb.i], ctx.brackets)
    return viable(
        ctx.mapped(hunk.lines[nb.j + nb.n : j]), ctx.index.lines[nb.i + nb.n : i], ctx.brackets
    )


def _cuts_definition(ctx: Ctx, a: int, b: int) -> bool:
    """Whether deleting original [a, b) would cut a definition (take part of it and more),
    at every equivalent shift of the range (equal lines at its ends let it slide)."""
    keys = ctx.index.keys

    def cuts(x: int, y: int) -> bool:
        return any(
            (d.start < x <= d.end < y - 1) or (x < d.start <= y - 1 < d.end) for d in ctx.defs
        )

    for shift in range(0, 12):
        if b + shift > len(keys) or keys[a : a + shift] != keys[b : b + shift]:
            break
        if not cuts(a + shift, b + shift):
            return False
    for shift in range(1, 12):
        if a - shift < 0 or keys[a - shift : a] != keys[b - shift : b]:
            break
        if not cuts(a - shift, b - shift):
            return False
    return True


def gap_doubts(
    ctx: Ctx,
    hunk: Hunk,
    keys: Sequence[str],
    pairs: list[Pair],
    pinned: frozenset[tuple[int, int]] = frozenset(),
    lo: int = 0,
    hi: int | None = None,
) -> list[str]:
    """Whether a change between two anchors is placed on evidence: the anchors on both sides
    of every changed stretch must be identified (see `_identified`), and a deletion needs lines
    with identity beside it."""
    hi = len(ctx.index) if hi is None else hi
    for n, ((ja, ia, _), (jb, ib, _)) in enumerate(zip(pairs, pairs[1:], strict=False)):
        gj, gi = jb - ja - 1, ib - ia - 1
        if gi <= 0 and gj <= 0:
            continue
        if gi - gj > _MAX_DELETION:
            return [f"drops {gi - gj} original lines between anchors (a missing marker?)"]
        if (
            gj == 0
            and not (
                _strong_near(ctx, keys, pairs, ja, -1) and _strong_near(ctx, keys, pairs, jb, 1)
            )
            and not _slides(ctx, hunk, keys, pairs, n)
        ):
            return [f"deletes {gi} lines between weak anchors"]
        if not any(ctx.index.keys[ia + 1 : ib]) or _modified_in_place(ctx, hunk, ja, jb, ia, ib):
            continue  # nothing but blank lines removed, or each rewritten where it stands
        left, right = _run(pairs, n, -1), _run(pairs, n + 1, 1)
        for run, other in ((left, right), (right, left)):
            if not _identified(ctx, keys, run, pinned, lo, hi) and not (
                _identified(ctx, keys, other, frozenset(), lo, hi)
                and _nearest(ctx, keys, run, ia, ib, lo, hi)
            ):
                j, i, _ = run[0]
                return [
                    f"the context at original line {i + 1} also occurs elsewhere: which "
                    "original lines the change replaces is a guess"
                ]
    return []


def _nearest(
    ctx: Ctx, keys: Sequence[str], run: list[Pair], ia: int, ib: int, lo: int, hi: int
) -> bool:
    """Whether a repeated run beside a gap stands at its occurrence nearest the gap's other
    side, where that side is identified on its own lines (no structural pin, which may follow
    from where this run stands). An occurrence past that side would put the run after it;
    one beyond the run would delete, unshown, more lines than the gap, the run's own copy
    among them; one inside the gap may be the one meant, with fewer lines replaced."""
    seq = [keys[j] for j, _, _ in run]
    start = run[0][1]
    if start < ib:
        return not any(start < s and s + len(seq) <= ib for s in ctx.index.count_run(seq, lo, hi))
    return not any(ia < s < start for s in ctx.index.count_run(seq, lo, hi))


def _modified_in_place(ctx: Ctx, hunk: Hunk, ja: int, jb: int, ia: int, ib: int) -> bool:
    """Whether the gap rewrites as many lines as it removes, each like the line it replaces
    (same statement key, or mostly the same text): an edit of those lines, not a deletion."""
    new, old = hunk.lines[ja + 1 : jb], ctx.index.lines[ia + 1 : ib]
    if len(new) != len(old):
        return False
    for x, o in zip(new, old, strict=True):
        kx, ko = statement_key(x), statement_key(o)
        if not (
            kx is not None
            and kx == ko
            and kx[0] != "blank"
            or SequenceMatcher(None, norm(x), norm(o), autojunk=False).ratio() >= 0.6
        ):
            return False
    return True


def _slides(ctx: Ctx, hunk: Hunk, keys: Sequence[str], pairs: list[Pair], n: int) -> bool:
    """Whether the deletion after pairs[n] writes the same file wherever its weak side stands.

    With identity on one side only, the weak run on the other (`}`, a blank) may be any copy of
    its lines (indented as shown) between the strong side and the anchor beyond a changed
    stretch on its far side: the changed lines then replace fewer or more of the lines before
    the copy and the deletion takes the rest. The file is the same either way when every such
    copy reads alike.
    """
    strong = (
        _strong_near(ctx, keys, pairs, pairs[n][0], -1),
        _strong_near(ctx, keys, pairs, pairs[n + 1][0], 1),
    )
    if strong[0] == strong[1]:
        return False
    run = _run(pairs, n, -1) if strong[1] else _run(pairs, n + 1, 1)
    k = pairs.index(run[0]) - 1 if strong[1] else pairs.index(run[-1]) + 1
    if not 0 <= k < len(pairs):
        return False
    lo, hi = sorted((pairs[k], pairs[n + 1] if strong[1] else pairs[n]))
    far = hunk.lines[lo[0] + 1 : run[0][0]] if strong[1] else hunk.lines[run[-1][0] + 1 : hi[0]]
    if not any(ln.strip() for ln in far):
        return False
    lines = ctx.index.lines
    mine = lines[run[0][1] : run[-1][1] + 1]
    return all(
        lines[a : a + len(run)] == mine
        for a in ctx.index.count_run([keys[j] for j, _, _ in run], lo[1] + 1, hi[1])
        if all(same(ctx, hunk.lines[j], a + t) for t, (j, _, _) in enumerate(run))
    )


def _run(pairs: list[Pair], k: int, step: int) -> list[Pair]:
    """The anchors contiguous on both sides with pairs[k], walking away from a gap by `step`."""
    run = [pairs[k]]
    while 0 <= k + step < len(pairs):
        j, i, _ = pairs[k + step]
        pj, pi, _ = run[-1]
        if (j - pj, i - pi) != (step, step):
            break
        run.append(pairs[k + step])
        k += step
    return sorted(run)


def _identified(
    ctx: Ctx,
    keys: Sequence[str],
    run: list[Pair],
    pinned: frozenset[tuple[int, int]],
    lo: int,
    hi: int,
) -> bool:
    """Whether a run of anchors can sit only where it does: a structural pin (a definition's
    name, a bracket opened by an anchored line) or a changed line taking a line's place is in
    it, a line of it with identity occurs once in the window, or the run as a whole does.
    Repeated lines (`/// <summary>`, `}`, `assert x`) placed in sequence say nothing of which
    occurrence they are."""
    if any(forced or (j, i) in pinned for j, i, forced in run):
        return True
    index = ctx.index
    if any(
        k and not index.trivial(k) and len(index.occurrences(k, lo, hi)) == 1
        for k in (keys[j] for j, _, _ in run)
    ):
        return True
    return len(index.count_run([keys[j] for j, _, _ in run], lo, hi)) == 1


def _strong_near(ctx: Ctx, keys: Sequence[str], pairs: list[Pair], j: int, step: int) -> bool:
    """Whether the run of anchors through hunk line `j` has a line with identity in it."""
    have = {p[0] for p in pairs}
    k = j
    while k in have:
        if keys[k] and not ctx.index.trivial(keys[k]):
            return True
        k += step
    return False


def unmarked_doubts(
    ctx: Ctx,
    hunk: Hunk,
    first: bool,
    last: bool,
    s: int,
    e: int,
    bounds: frozenset[int] = frozenset(),
) -> list[str]:
    """A snippet end without a marker that stops a line or two short of the file's end (closing
    brackets alone, like a class's final `}`, do not count: no edit deletes just those). An end
    at a bound of a definition the hunk names (`bounds`: its first line, the line after its
    last) is where the snippet's subject begins or ends, not a deletion of what lies beyond."""
    out = []
    keys = ctx.index.keys
    if first and not hunk.marker_before and s not in bounds:
        n = sum(1 for k in keys[:s] if k)
        if 0 < n <= 2 and not _closers_only(ctx, keys[:s]):
            out.append(f"unmarked start: the {n} line(s) above may be meant deleted")
    if last and not hunk.marker_after and e not in bounds:
        n = sum(1 for k in keys[e:] if k)
        if 0 < n <= 2 and not _closers_only(ctx, keys[e:]):
            out.append(f"unmarked end: the {n} line(s) below may be meant deleted")
    return out


def _closers_only(ctx: Ctx, keys: Sequence[str]) -> bool:
    return all(not k or (k[0] in ")]}" and ctx.index.trivial(k)) for k in keys)

"""Two readings of an open edge: keyed pairing (changed statements with the keys of the
original's statements at the same place) and outer context (the edge's lines next to the marker
are the original's lines at the boundary, the rest inserted between)."""

from __future__ import annotations

from collections.abc import Sequence

from edge_spec.apply.merge.anchors import norm
from edge_spec.apply.merge.context import (
    WINDOW,
    Ctx,
    Edge,
    blank_run,
    indent,
    split_blanks,
)
from edge_spec.apply.merge.structure import statement_key, statements, viable


def pair(ctx: Ctx, core: list[str], boundary: int, avail: int, tail: bool) -> tuple[int, bool]:
    """Walk outward from the boundary pairing lines: equal lines, or whole statements with the
    same key. Returns the original lines paired and whether every changed line paired."""
    lines = ctx.index.lines
    lo, hi = (
        (boundary, boundary + min(avail, WINDOW))
        if tail
        else (boundary - min(avail, WINDOW), boundary)
    )
    window = lines[lo:hi]
    xs, os_ = statements(core, ctx.brackets), statements(window, ctx.brackets)
    step = 1 if tail else -1
    x, o = (0, 0) if tail else (len(core) - 1, len(window) - 1)
    while 0 <= x < len(core) and 0 <= o < len(window):
        if norm(core[x]) == norm(window[o]) and (
            not norm(core[x]) or ctx.imap.apply(indent(core[x])) == indent(window[o])
        ):
            x, o = x + step, o + step
            continue
        sx, so = _statement_at(xs, x, tail), _statement_at(os_, o, tail)
        if sx is None or so is None:
            break
        kx, ko = statement_key(core[sx[0]]), statement_key(window[so[0]])
        if (
            kx is None
            or kx != ko
            or kx[0] == "blank"
            or ctx.imap.apply(indent(core[sx[0]])) != indent(window[so[0]])
        ):
            break
        x, o = (sx[1], so[1]) if tail else (sx[0] - 1, so[0] - 1)
    taken = o if tail else len(window) - 1 - o
    done = x >= len(core) if tail else x < 0
    return taken, done


def _statement_at(segs: list[tuple[int, int]], k: int, tail: bool) -> tuple[int, int] | None:
    """The statement that starts (walking forward) or ends (walking back) at line k."""
    for a, b in segs:
        if (a == k) if tail else (b - 1 == k):
            return a, b
    return None


def settle_outer(
    ctx: Ctx,
    new: Sequence[str],
    boundary: int,
    avail: int,
    tail: bool,
    paired: tuple[int, bool] | None = None,
    longer: bool = True,
) -> Edge | None:
    """The edge read as outer context + new lines (`outer_context`), if that reading holds.

    Unsure when key pairing reads the edge differently, when the edge's lines also occur
    further on (they may be context with lines deleted before them) or more of its marker end
    does (`longer`), or its trivial outer lines do beside the line its new code modifies, or
    when the outer lines are all trivial (`}`, `return None`) and the whole edge could as well
    be new code (it balances).
    """
    k = outer_context(ctx, new, boundary, avail, tail)
    if not k:
        return None
    core, blanks = split_blanks(new, tail)
    take = k + blank_run(ctx, boundary, k, blanks, avail, tail)
    if paired is None:
        paired = pair(ctx, core, boundary, avail, tail)
    if paired[1] and paired[0] != k:
        return Edge(
            take,
            False,
            "the lines next to the marker read both as context and as modified lines",
            True,
        )
    keys = [norm(ln) for ln in core]
    lo, hi = (
        (boundary, boundary + min(avail, WINDOW))
        if tail
        else (boundary - min(avail, WINDOW), boundary)
    )
    here = boundary if tail else boundary - k
    outer = core[:k] if not tail else core[len(core) - k :]
    rest = core[k:] if not tail else core[: len(core) - k]
    if (
        any(q != here for q in ctx.index.count_run(keys, lo, hi))
        or (longer and _longer_elsewhere(ctx, keys, k, lo, hi, tail))
        or _keyed_further(ctx, outer, rest, here, lo, hi, tail)
    ):
        return Edge(
            take,
            False,
            "the lines next to the marker also match further on (lines "
            "between replaced or deleted?)",
            True,
        )
    if not viable(ctx.mapped(rest), [], ctx.brackets):
        return Edge(take, False, "the new lines next to the marker do not balance")
    if (
        all(ctx.index.trivial(norm(ln)) for ln in outer)
        and len(core) > k
        and viable(ctx.mapped(core), [], ctx.brackets)
    ):
        return Edge(take, False, "the lines next to the marker may be context or new code")
    return Edge(take, True, "")


def _keyed_further(
    ctx: Ctx,
    outer: Sequence[str],
    rest: Sequence[str],
    here: int,
    lo: int,
    hi: int,
    tail: bool,
) -> bool:
    """Whether trivial outer lines (`}`) also stand elsewhere in the window beside an original
    line that the new line next to them modifies (the same statement key): that reading
    replaces the lines between, and the nearest copy is no reason to prefer this one."""
    keys = [norm(ln) for ln in outer]
    if not rest or not all(ctx.index.trivial(k) for k in keys):
        return False
    mine = statement_key(rest[-1] if tail else rest[0])
    if mine is None or mine[0] == "blank":
        return False
    lines = ctx.index.lines
    for q in ctx.index.count_run(keys, lo, hi):
        if q == here:
            continue
        at = q - 1 if tail else q + len(keys)
        if 0 <= at < len(lines) and statement_key(lines[at]) == mine:
            return True
    return False


def _longer_elsewhere(ctx: Ctx, keys: Sequence[str], k: int, lo: int, hi: int, tail: bool) -> bool:
    """Whether more of the edge's marker end than the `k` lines matching at the boundary matches
    somewhere else in the window: that reading keeps more of the snippet as context."""
    for n in range(k + 1, len(keys)):
        part = keys[len(keys) - n :] if tail else keys[:n]
        if not ctx.index.count_run(part, lo, hi):
            return False
        if any(part):
            return True
    return False


def outer_context(ctx: Ctx, new: Sequence[str], boundary: int, avail: int, tail: bool) -> int:
    """Lines at the marker end of the edge that equal the original lines at the boundary.

    `# ... / });` + new code before a context line whose predecessor is `});`: the closers end
    the elided code and the new code goes in after them (and mirrored for a tail).
    """
    index = ctx.index
    core, _ = split_blanks(new, tail)
    for k in range(min(len(core), avail), 0, -1):
        ours = core[:k] if not tail else core[len(core) - k :]
        start = boundary - k if not tail else boundary
        if any(ln.strip() for ln in ours) and all(
            norm(a) == index.keys[start + t]
            and (not norm(a) or ctx.imap.apply(indent(a)) == index.indents[start + t])
            for t, a in enumerate(ours)
        ):
            return k
    return 0

"""Open hunk edges: changed lines between a hunk's outermost context and a marker.

`A / B' / # ...` says B' follows A, but not whether B' replaces the line after A or is new: the
marker stands for unchanged code, yet snippets routinely drop the context of a modified line.
The edge is settled, in this order, and trusted only where the reading cannot be another:

1. nothing to decide: the next hunk's context starts right where this one stops (insertion);
2. a snippet that is the whole file: its first (last) lines replace the original's first (last)
   lines when those are about as many (a guess: a partial snippet that stops early reads the
   same);
3. statement keys: every changed statement has the key (definition name, assignment target,
   mapping key, import, `return`) of the original statement at the same place outward from the
   context; they replace those statements (an edit seldom puts `timeout = 10` right above
   `timeout = 5`); a lone line that opens a block replaces the header of such a statement
   alone, its body left to the marker;
4. outer context: the edge's lines next to the marker equal the original's lines at the
   boundary (`});` after `// ...`): those are context, the rest is inserted between;
5. new whole definitions (syntax tree) whose names the original lacks, where a definition can
   start: inserted;
6. closers of the enclosing blocks after the new lines (`frame`): the new lines replace what
   the original has before those closers, where they read as its rewrite;
7. outer lines re-shown off the boundary: the edge's lines next to the marker stand once, a
   few lines off the boundary, and its other lines rewrite the original lines between (most
   of the text shared, balanced alike): they replace those (`_outer_rewrite`); with no
   marker at this end (`literal`), the file's last (first) lines, when no more than the
   edge's and read as their old text, likewise;
8. otherwise the best guess (replace a similar line, else insert) is kept but not trusted,
   unless that similar line is next to the context and the edge's other lines re-show the
   lines after it (closers) in a way no insertion could (`_rewrites_its_line`).

Blank lines at the marker end of an edge become the original's blank lines there when it has
them (`blank_run`), so a new function keeps the file's spacing on both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from edge_spec.apply.merge.anchors import norm
from edge_spec.apply.merge.context import (
    WHOLE_FILE,
    Ctx,
    Edge,
    blank_run,
    indent,
    region,
    split_blanks,
)
from edge_spec.apply.merge.frame import closing_frame
from edge_spec.apply.merge.outer import pair, settle_outer
from edge_spec.apply.merge.structure import imports_cover, is_import, viable, width
from edge_spec.apply.merge.syntax import hunk_definitions


def _new_definitions(ctx: Ctx, core: list[str], boundary: int, tail: bool) -> bool:
    """Whether `core` is whole new definitions that may be inserted at `boundary`."""
    items = hunk_definitions(ctx.language, core)
    if not items or any(d.kind not in ("function", "class") or not d.complete for d in items):
        return False
    if any((d.kind, d.name) in ctx.names for d in items):
        return False
    level = ctx.imap.apply(indent(core[items[0].head]))
    if any(d.start < boundary <= d.end and ctx.index.indents[d.head] == level for d in ctx.defs):
        return False  # inside a definition at its level: between a decorator and its def, say
    index = ctx.index
    nxt = (
        boundary
        if boundary < len(index) and index.keys[boundary]
        else index.next_nonblank(boundary, 1)
    )
    if nxt is not None and width(index.indents[nxt]) > width(level):
        return False  # the next original line is deeper: this is inside a body
    return not _resembles_neighbour(ctx, core, boundary, tail)


def _resembles_neighbour(ctx: Ctx, core: list[str], boundary: int, tail: bool) -> bool:
    """Whether the original definition next to the boundary has nearly `core`'s body, or holds
    most of its statements (a rename, the body reworked: taken out of a `using` block, a call
    dropped). Shared boilerplate like lock / unlock alone does not make one."""
    near = (
        ctx.index.next_nonblank(boundary - 1, 1) if tail else ctx.index.next_nonblank(boundary, -1)
    )
    if near is None:
        return False
    for d in ctx.defs:
        if (tail and d.start == near) or (not tail and d.end == near):
            body = [ctx.index.keys[k] for k in range(d.head + 1, d.end + 1)]
            mine = [norm(ln) for ln in core[1:]]
            if SequenceMatcher(None, mine, body, autojunk=False).ratio() >= 0.8:
                return True
            stated = {k for k in body if k and not ctx.index.trivial(k)}
            own = [k for k in mine if k and not ctx.index.trivial(k)]
            shared = sum(1 for k in own if k in stated)
            return shared >= 3 and shared >= 0.6 * len(own)
    return False


def resolve(
    ctx: Ctx,
    new: Sequence[str],
    boundary: int,
    limit: int,
    tail: bool,
    whole: bool = False,
    literal: bool = False,
) -> Edge:
    """Settle an open edge: `new` lies beyond original `boundary` (after it for a tail, before
    it for a head) and may replace original lines up to `limit`.

    `whole` says the snippet is the whole file at this end: the edge replaces everything to it.
    `literal` says the snippet has no marker at this end and `limit` is the file's end there.
    """
    avail = (limit - boundary) if tail else (boundary - limit)
    core, blanks = split_blanks(new, tail)
    if not core:
        return Edge(0, True, "")
    if avail <= 0:
        return Edge(0, True, "inserted where the next context begins")
    if whole and avail <= len(core) + 2:
        # The best guess for a marker-free snippet that covers most of the file, never sure: a
        # partial snippet that just stops (or starts) with new lines reads the same.
        return Edge(avail, False, WHOLE_FILE)
    take, all_paired = pair(ctx, core, boundary, avail, tail)
    if take and all_paired:
        take += blank_run(ctx, boundary, take, blanks, avail, tail)
        if _seen_nearby(ctx, core, boundary + take if tail else boundary - take, limit, tail):
            return Edge(
                take,
                False,
                "a changed line next to a marker equals an original line "
                "nearby: it may be context, with the lines between deleted",
            )
        ok = viable(ctx.mapped(core), region(ctx, boundary, take, tail), ctx.brackets)
        if not ok and _header(ctx, core, boundary, tail):
            return Edge(1, True, "")
        return Edge(
            take,
            ok,
            ""
            if ok
            else "changed lines next to a marker do not balance "
            "like the statements they would modify",
        )
    outer = settle_outer(ctx, new, boundary, avail, tail, (take, all_paired))
    if outer is not None:
        return outer
    if _new_definitions(ctx, core, boundary, tail):
        return Edge(blank_run(ctx, boundary, 0, blanks, avail, tail), True, "")
    block = _import_block(ctx, core, boundary, avail, tail)
    if block is not None:
        take = block.take + blank_run(ctx, boundary, block.take, blanks, avail, tail)
        return Edge(take, block.sure, block.reason)
    framed = (
        closing_frame(ctx.index, ctx.brackets, ctx.imap, core, boundary, limit) if tail else None
    )
    if framed is not None:
        return Edge(framed + blank_run(ctx, boundary, framed, blanks, avail, tail), True, "")
    if (
        literal
        and avail <= len(core)
        and _reads_as_rewrite(ctx, core, region(ctx, boundary, avail, tail))
    ):
        # No marker, and the file's last (first) lines read as the old text of the new ones: a
        # snippet that stops short would leave unrelated code there, not a near copy.
        return Edge(avail, True, "")
    rewrite = (
        _outer_rewrite(ctx, core, boundary, avail, tail)
        if not viable(ctx.mapped(core), [], ctx.brackets)
        else None
    )
    if rewrite is not None:
        return Edge(rewrite + blank_run(ctx, boundary, rewrite, blanks, avail, tail), True, "")
    if take:
        return Edge(
            take,
            False,
            f"changed lines next to a marker may replace more or fewer than {take} original lines",
        )
    return _guess(ctx, core, boundary, avail, tail, blanks)


def _header(ctx: Ctx, core: list[str], boundary: int, tail: bool) -> bool:
    """Whether a lone changed line that opens a block (`match probe("2018") {`, the body left
    to the marker) rewrites the header of the keyed statement it paired with: the one line
    opening as many brackets in the same way, its body kept."""
    if not tail or len(core) != 1 or boundary >= len(ctx.index):
        return False
    mine = ctx.brackets.line(ctx.imap.line(core[0]))
    return mine[0] > 0 and mine == ctx.brackets.line(ctx.index.lines[boundary])


def _import_block(ctx: Ctx, core: list[str], boundary: int, avail: int, tail: bool) -> Edge | None:
    """Changed lines that are all imports, next to the original's import block: the snippet
    shows the block as it is to be (consolidated, reordered, grown). Sure when every original
    import of the block is still imported by the new ones (nothing is silently dropped)."""
    if not any(is_import(ln) for ln in core) or not all(
        is_import(ln) or not ln.strip() for ln in core
    ):
        return None
    lines = ctx.index.lines
    k = 0
    while k < avail:
        line = lines[boundary + k] if tail else lines[boundary - k - 1]
        if line.strip() and not is_import(line):
            break
        k += 1
    while k and not (lines[boundary + k - 1] if tail else lines[boundary - k]).strip():
        k -= 1  # blank lines after the block belong to what follows it
    old = region(ctx, boundary, k, tail)
    if not any(is_import(ln) for ln in old):
        return None
    if not imports_cover(core, old):
        return Edge(
            k,
            False,
            "the new imports drop some of the original's: a consolidation or "
            "new imports beside the old is unclear",
        )
    return Edge(k, True, "")


def _seen_nearby(ctx: Ctx, core: list[str], boundary: int, limit: int, tail: bool) -> bool:
    """Whether a changed line equals an original line beyond what the edge replaces."""
    lo, hi = (boundary, limit) if tail else (limit, boundary)
    return any(
        ctx.index.occurrences(k, lo, hi)
        for ln in core
        if (k := norm(ln)) and not ctx.index.trivial(k)
    )


def _guess(ctx: Ctx, core: list[str], boundary: int, avail: int, tail: bool, blanks: int) -> Edge:
    near = (
        ctx.index.next_nonblank(boundary - 1, 1) if tail else ctx.index.next_nonblank(boundary, -1)
    )
    edge = core[0] if tail else core[-1]
    reason = "changed lines next to a marker: insertion or replacement is unclear"
    if near is not None and abs(near - boundary) < avail + (0 if tail else 1):
        ratio = SequenceMatcher(None, norm(edge), ctx.index.keys[near]).ratio()
        if ratio >= 0.6:
            take = (near - boundary + 1) if tail else (boundary - near)
            shown = _shown_beyond(ctx, core, near, tail)
            if take == 1 and shown and _rewrites_its_line(ctx, core, boundary, near, avail, tail):
                take += shown
                return Edge(take + blank_run(ctx, boundary, take, blanks, avail, tail), True, "")
            return Edge(take + shown, False, f"changed line may replace original line {near + 1}")
    return Edge(0, False, reason)


def _shown_beyond(ctx: Ctx, core: list[str], near: int, tail: bool) -> int:
    """How many original lines past `near` (away from the context) the edge's other lines show
    as they are: a changed line and the closers after it (`end`, `}`) re-shown."""
    rest = [norm(ln) for ln in (core[1:] if tail else core[:-1])]
    if not rest:
        return 0
    keys = ctx.index.keys
    seen = keys[near + 1 : near + 1 + len(rest)] if tail else keys[max(0, near - len(rest)) : near]
    return len(rest) if seen == rest else 0


def _rewrites_its_line(
    ctx: Ctx, core: list[str], boundary: int, near: int, avail: int, tail: bool
) -> bool:
    """Whether the edge's changed line, right next to the context and as deep as the original
    line there, surely rewrites that line, the rest of the edge re-showing the lines after it.

    Sure only where the edge cannot be new code put before that line: it does not balance on
    its own, or (before a marker) it ends shallower than the changed line, on a line that opens
    no block, so the pushed-down original line could not follow it. A guard that balances
    (`if err != nil { return }` above `if x == nil { return }`) stays unsure."""
    mapped = ctx.mapped(core)
    edge = mapped[0] if tail else mapped[-1]
    lines, indents = ctx.index.lines, ctx.index.indents
    far = boundary + avail if tail else boundary - avail
    if indent(edge) != indent(lines[near]) or _seen_nearby(
        ctx, core, near + 1 if tail else near, far, tail
    ):
        return False
    if not viable(mapped, region(ctx, boundary, len(core), tail), ctx.brackets):
        return False
    if not viable(mapped, [], ctx.brackets):
        return True
    last = near + len(core) - 1
    if not tail or last >= len(lines):
        return False
    after = ctx.index.next_nonblank(last, 1)
    opens = after is not None and width(indents[after]) > width(indents[last])
    return not opens and width(indents[last]) < width(indents[near])


def _outer_rewrite(ctx: Ctx, core: list[str], boundary: int, avail: int, tail: bool) -> int | None:
    """The original lines the edge replaces, where its lines next to the marker are the
    original's lines a few lines off the boundary and its other lines rewrite those between:
    `}` / a fence / a blank, then a reworded paragraph. Sure only with one such place in reach
    (no more original lines replaced than new ones, plus two), the new lines reading as a
    rewrite of the old ones, and balanced alike. The caller asks only where the edge does not
    balance on its own: one that does may be new code before the boundary (a new guard
    `if err != nil { return }` above a like `if x == nil { return }`)."""
    keys = [norm(ln) for ln in core]
    for k in range(len(core) - 1, 0, -1):
        outer = keys[:k] if not tail else keys[len(keys) - k :]
        rest = core[k:] if not tail else core[: len(core) - k]
        if not any(outer):
            continue
        reach = min(avail, len(rest) + 2 + k)
        lo, hi = (boundary - reach, boundary) if not tail else (boundary, boundary + reach)
        spots = [
            q
            for q in ctx.index.count_run(outer, max(0, lo), hi)
            if (boundary - q - k if not tail else q - boundary) >= 1
        ]
        if len(spots) != 1:
            continue
        q = spots[0]
        old = ctx.index.lines[q + k : boundary] if not tail else ctx.index.lines[boundary:q]
        if not _reads_as_rewrite(ctx, rest, old):
            return None
        return boundary - q if not tail else q + k - boundary
    return None


def _reads_as_rewrite(ctx: Ctx, new: Sequence[str], old: Sequence[str]) -> bool:
    """Whether `new` reads as a rewrite of `old`: most of their text shared, balanced alike."""
    a = " ".join(norm(ln) for ln in new if ln.strip())
    b = " ".join(norm(ln) for ln in old if ln.strip())
    if not a or not b:
        return False
    ratio = SequenceMatcher(None, a, b, autojunk=False).ratio()
    return ratio >= 0.6 and viable(ctx.mapped(list(new)), list(old), ctx.brackets)

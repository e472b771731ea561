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
7. otherwise the best guess (replace a similar line, else insert) is kept but not trusted.

Blank lines at the marker end of an edge become the original's blank lines there when it has
them (`_blank_run`), so a new function keeps the file's spacing on both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from edge_spec.apply.merge.anchors import LineIndex, norm
from edge_spec.apply.merge.frame import closing_frame
from edge_spec.apply.merge.structure import (
    Brackets,
    IndentMap,
    imports_cover,
    is_import,
    restyle,
    statement_key,
    statements,
    viable,
    width,
)
from edge_spec.apply.merge.syntax import Definition, hunk_definitions

_WINDOW = 60
WHOLE_FILE = "the snippet may be the whole file, or stop short of its end"


@dataclass
class Ctx:
    """What every placement step needs to know about the original and the snippet's style."""

    index: LineIndex
    language: str
    brackets: Brackets
    imap: IndentMap
    defs: list[Definition]
    names: set[tuple[str, str]] = field(default_factory=set)
    keep_trailing: bool = True  # write the snippet's trailing whitespace as given
    style: tuple[str, int] = ("", 4)  # the original's indentation: "tabs"/"spaces", unit
    style_sure: bool = True  # the unit is known (else a re-indented line is a guess)
    guessed: bool = False  # set when a changed line was re-indented by a guessed unit
    # The snippet indents some lines with tabs and others with the file's spaces, exactly:
    # no editor converted it, so its tabs are the edit's (a commit that re-indents lines).
    literal: bool = False

    def mapped(self, lines: Sequence[str]) -> list[str]:
        return [self.imap.line(ln) for ln in lines]

    def out(self, line: str) -> str:
        """A changed snippet line as it goes into the file, in the original's style."""
        if not line.strip() and (self.imap.kind == "same" or self.literal):
            # A new blank line's blanks are the edit's (an indented blank line between
            # methods), unless a paste or a re-indent put them there.
            return line if self.keep_trailing else ""
        mapped = line if self.literal else self.imap.line(line)
        text = mapped if self.literal else restyle(mapped, *self.style)
        self.guessed = self.guessed or (text != mapped and not self.style_sure)
        return text if self.keep_trailing else text.rstrip()

    def around(self, a: int, b: int) -> int | None:
        """Smallest indentation width of the original's nonblank lines next to [a, b)."""
        near = [
            k
            for k in (self.index.next_nonblank(a, -1), self.index.next_nonblank(b - 1, 1))
            if k is not None
        ]
        return min((width(self.index.indents[k]) for k in near), default=None)


@dataclass(frozen=True)
class Edge:
    """`take` original lines beyond the boundary are replaced by the edge's snippet lines."""

    take: int
    sure: bool
    reason: str
    rival: bool = False  # unsure because another reading of the snippet fits (not a bad fit)


def _split_blanks(new: Sequence[str], tail: bool) -> tuple[list[str], int]:
    core = list(new)
    blanks = 0
    while core and not (core[-1] if tail else core[0]).strip():
        core.pop(-1 if tail else 0)
        blanks += 1
    return core, blanks


def _region(ctx: Ctx, boundary: int, take: int, tail: bool) -> list[str]:
    lines = ctx.index.lines
    return lines[boundary : boundary + take] if tail else lines[boundary - take : boundary]


def _pair(ctx: Ctx, core: list[str], boundary: int, avail: int, tail: bool) -> tuple[int, bool]:
    """Walk outward from the boundary pairing lines: equal lines, or whole statements with the
    same key. Returns the original lines paired and whether every changed line paired."""
    lines = ctx.index.lines
    lo, hi = (
        (boundary, boundary + min(avail, _WINDOW))
        if tail
        else (boundary - min(avail, _WINDOW), boundary)
    )
    window = lines[lo:hi]
    xs, os_ = statements(core, ctx.brackets), statements(window, ctx.brackets)
    step = 1 if tail else -1
    x, o = (0, 0) if tail else (len(core) - 1, len(window) - 1)
    while 0 <= x < len(core) and 0 <= o < len(window):
        if norm(core[x]) == norm(window[o]) and (
            not norm(core[x]) or ctx.imap.apply(_ind(core[x])) == _ind(window[o])
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
            or ctx.imap.apply(_ind(core[sx[0]])) != _ind(window[so[0]])
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


def _ind(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _new_definitions(ctx: Ctx, core: list[str], boundary: int, tail: bool) -> bool:
    """Whether `core` is whole new definitions that may be inserted at `boundary`."""
    items = hunk_definitions(ctx.language, core)
    if not items or any(d.kind not in ("function", "class") or not d.complete for d in items):
        return False
    if any((d.kind, d.name) in ctx.names for d in items):
        return False
    level = ctx.imap.apply(_ind(core[items[0].head]))
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
    """Whether the original definition next to the boundary has nearly `core`'s body (a rename:
    shared boilerplate like lock / unlock alone does not make one)."""
    near = (
        ctx.index.next_nonblank(boundary - 1, 1) if tail else ctx.index.next_nonblank(boundary, -1)
    )
    if near is None:
        return False
    for d in ctx.defs:
        if (tail and d.start == near) or (not tail and d.end == near):
            body = [ctx.index.keys[k] for k in range(d.head + 1, d.end + 1)]
            mine = [norm(ln) for ln in core[1:]]
            return SequenceMatcher(None, mine, body, autojunk=False).ratio() >= 0.8
    return False


def resolve(
    ctx: Ctx, new: Sequence[str], boundary: int, limit: int, tail: bool, whole: bool = False
) -> Edge:
    """Settle an open edge: `new` lies beyond original `boundary` (after it for a tail, before
    it for a head) and may replace original lines up to `limit`.

    `whole` says the snippet is the whole file at this end: the edge replaces everything to it.
    """
    avail = (limit - boundary) if tail else (boundary - limit)
    core, blanks = _split_blanks(new, tail)
    if not core:
        return Edge(0, True, "")
    if avail <= 0:
        return Edge(0, True, "inserted where the next context begins")
    if whole and avail <= len(core) + 2:
        # The best guess for a marker-free snippet that covers most of the file, never sure: a
        # partial snippet that just stops (or starts) with new lines reads the same.
        return Edge(avail, False, WHOLE_FILE)
    take, all_paired = _pair(ctx, core, boundary, avail, tail)
    if take and all_paired:
        take += _blank_run(ctx, boundary, take, blanks, avail, tail)
        if _seen_nearby(ctx, core, boundary + take if tail else boundary - take, limit, tail):
            return Edge(
                take,
                False,
                "a changed line next to a marker equals an original line "
                "nearby: it may be context, with the lines between deleted",
            )
        ok = viable(ctx.mapped(core), _region(ctx, boundary, take, tail), ctx.brackets)
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
        return Edge(_blank_run(ctx, boundary, 0, blanks, avail, tail), True, "")
    block = _import_block(ctx, core, boundary, avail, tail)
    if block is not None:
        take = block.take + _blank_run(ctx, boundary, block.take, blanks, avail, tail)
        return Edge(take, block.sure, block.reason)
    framed = (
        closing_frame(ctx.index, ctx.brackets, ctx.imap, core, boundary, limit) if tail else None
    )
    if framed is not None:
        return Edge(framed + _blank_run(ctx, boundary, framed, blanks, avail, tail), True, "")
    if take:
        return Edge(
            take,
            False,
            f"changed lines next to a marker may replace more or fewer than {take} original lines",
        )
    return _guess(ctx, core, boundary, avail, tail)


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
    old = _region(ctx, boundary, k, tail)
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
    does (`longer`), or when the outer lines are all trivial (`}`, `return None`) and the whole
    edge could as well be new code (it balances).
    """
    k = outer_context(ctx, new, boundary, avail, tail)
    if not k:
        return None
    core, blanks = _split_blanks(new, tail)
    take = k + _blank_run(ctx, boundary, k, blanks, avail, tail)
    if paired is None:
        paired = _pair(ctx, core, boundary, avail, tail)
    if paired[1] and paired[0] != k:
        return Edge(
            take,
            False,
            "the lines next to the marker read both as context and as modified lines",
            True,
        )
    keys = [norm(ln) for ln in core]
    lo, hi = (
        (boundary, boundary + min(avail, _WINDOW))
        if tail
        else (boundary - min(avail, _WINDOW), boundary)
    )
    here = boundary if tail else boundary - k
    if any(q != here for q in ctx.index.count_run(keys, lo, hi)) or (
        longer and _longer_elsewhere(ctx, keys, k, lo, hi, tail)
    ):
        return Edge(
            take,
            False,
            "the lines next to the marker also match further on (lines "
            "between replaced or deleted?)",
            True,
        )
    outer = core[:k] if not tail else core[len(core) - k :]
    rest = core[k:] if not tail else core[: len(core) - k]
    if not viable(ctx.mapped(rest), [], ctx.brackets):
        return Edge(take, False, "the new lines next to the marker do not balance")
    if (
        all(ctx.index.trivial(norm(ln)) for ln in outer)
        and len(core) > k
        and viable(ctx.mapped(core), [], ctx.brackets)
    ):
        return Edge(take, False, "the lines next to the marker may be context or new code")
    return Edge(take, True, "")


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
    core, _ = _split_blanks(new, tail)
    for k in range(min(len(core), avail), 0, -1):
        ours = core[:k] if not tail else core[len(core) - k :]
        start = boundary - k if not tail else boundary
        if any(ln.strip() for ln in ours) and all(
            norm(a) == index.keys[start + t]
            and (not norm(a) or ctx.imap.apply(_ind(a)) == index.indents[start + t])
            for t, a in enumerate(ours)
        ):
            return k
    return 0


def _seen_nearby(ctx: Ctx, core: list[str], boundary: int, limit: int, tail: bool) -> bool:
    """Whether a changed line equals an original line beyond what the edge replaces."""
    lo, hi = (boundary, limit) if tail else (limit, boundary)
    return any(
        ctx.index.occurrences(k, lo, hi)
        for ln in core
        if (k := norm(ln)) and not ctx.index.trivial(k)
    )


def _blank_run(ctx: Ctx, boundary: int, take: int, blanks: int, avail: int, tail: bool) -> int:
    """How many of the edge's outer blank lines are the original's blank lines there."""
    k = 0
    while k < min(blanks, avail - take):
        i = boundary + take + k if tail else boundary - take - k - 1
        if not (0 <= i < len(ctx.index)) or ctx.index.keys[i]:
            break
        k += 1
    return k


def _guess(ctx: Ctx, core: list[str], boundary: int, avail: int, tail: bool) -> Edge:
    near = (
        ctx.index.next_nonblank(boundary - 1, 1) if tail else ctx.index.next_nonblank(boundary, -1)
    )
    edge = core[0] if tail else core[-1]
    reason = "changed lines next to a marker: insertion or replacement is unclear"
    if near is not None and abs(near - boundary) < avail + (0 if tail else 1):
        ratio = SequenceMatcher(None, norm(edge), ctx.index.keys[near]).ratio()
        if ratio >= 0.6:
            take = (near - boundary + 1) if tail else (boundary - near)
            return Edge(take, False, f"changed line may replace original line {near + 1}")
    return Edge(0, False, reason)

"""Anchors beyond equal lines: definitions by name, closing brackets, block ends, statement keys.

A pair (hunk line, original line, forced) says the hunk line takes the original line's place;
`forced` pairs are changed lines (the snippet's text wins), the others are context.

- Definitions: a function or class of the hunk whose name and kind match exactly one original
  definition in the window confines the hunk lines inside it to that definition's lines, anchors
  its header, and its last line when the snippet gives the definition whole.
- Closing brackets: a `}` whose opening line is anchored is the original's matching `}`.
- Block ends: a hunk after a marker that sits inside a block (`def f():` / `    # ...` / new
  last lines) ends where that block ends in the original when both end on a `return`-like
  statement at the block's body level (nothing can follow one there).
- Statement keys: a hunk with no context at all whose first statement has a key (assignment
  target, definition name, mapping key, import) found once in the window starts there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from difflib import SequenceMatcher

from edge_spec.apply.languages import Language, language
from edge_spec.apply.merge.anchors import indent_of, norm
from edge_spec.apply.merge.context import Ctx
from edge_spec.apply.merge.markers import Hunk
from edge_spec.apply.merge.structure import is_import, statement_key, width
from edge_spec.apply.merge.syntax import Definition, hunk_definitions

Pair = tuple[int, int, bool]
PairOk = Callable[[int, int], bool]
Match = tuple[Definition, Definition]  # (hunk item, original definition)
_CLOSERS = ")]}"


def same(ctx: Ctx, line: str, i: int) -> bool:
    """Whether a snippet line is original line `i` unchanged (text and mapped indentation)."""
    return (
        norm(line) == ctx.index.keys[i] and ctx.imap.apply(indent_of(line)) == ctx.index.indents[i]
    )


def merge_pairs(pairs: list[Pair], extra: Sequence[Pair]) -> bool:
    """Add anchors that keep the pairs strictly increasing on both sides; False on conflict."""
    by_j = {j: (i, f) for j, i, f in pairs}
    for j, i, f in extra:
        if j in by_j and by_j[j][0] != i:
            return False
        by_j.setdefault(j, (i, f))
    merged = sorted((j, i, f) for j, (i, f) in by_j.items())
    if any(b[1] <= a[1] for a, b in zip(merged, merged[1:], strict=False)):
        return False
    pairs[:] = merged
    return True


def definition_matches(ctx: Ctx, hunk: Hunk, lo: int, hi: int) -> list[Match]:
    """Hunk definitions with exactly one original definition of that name and kind in [lo, hi)."""
    if not ctx.defs:
        return []
    items = hunk_definitions(ctx.language, hunk.lines) or ()
    out: list[Match] = []
    for it in items:
        if it.kind not in ("function", "class"):
            continue
        want = ctx.imap.apply(indent_of(hunk.lines[it.head]))
        found = [
            d
            for d in ctx.defs
            if d.kind == it.kind
            and d.name == it.name
            and lo <= d.start
            and d.end < hi
            and ctx.index.indents[d.head] == want
        ]
        if len(found) == 1:
            out.append((it, found[0]))
    return out


def new_definitions(ctx: Ctx, hunk: Hunk) -> list[tuple[Definition, list[Definition]]]:
    """Whole hunk definitions the original lacks, with the original definitions at their level.

    A new definition is inserted, not grafted onto another one's body: its lines must not pair
    with lines inside those (boilerplate like lock / unlock would otherwise match).
    """
    if not ctx.defs:
        return []
    lang = language(ctx.language)
    out = []
    for it in hunk_definitions(ctx.language, hunk.lines) or ():
        if it.kind in ("function", "class") and it.complete and (it.kind, it.name) not in ctx.names:
            want = ctx.imap.apply(indent_of(hunk.lines[it.head]))
            out.append(
                (
                    replace(it, start=_doc_start(hunk.lines, it.start, lang)),
                    [
                        replace(d, start=_doc_start(ctx.index.lines, d.start, lang))
                        for d in ctx.defs
                        if d.kind == it.kind and ctx.index.indents[d.head] == want
                    ],
                )
            )
    return out


def _doc_start(lines: Sequence[str], start: int, lang: Language | None) -> int:
    """Where a definition starting at `start` starts with the comment lines right above it:
    its doc comment, which says the same of every overload and sibling (`/// <param ...>`)."""
    if lang is None:
        return start
    opens = tuple(lang.line_comment) + tuple(o for o, _ in lang.block_comment)
    closes = tuple(c for _, c in lang.block_comment)
    while start > 0:
        text = lines[start - 1].strip()
        if not text or not (text.startswith(opens) or text.endswith(closes) or text[0] == "*"):
            break
        start -= 1
    return start


def confine(
    matches: Sequence[Match], fresh: Sequence[tuple[Definition, list[Definition]]] = ()
) -> PairOk:
    """A pair test: hunk lines inside a matched definition pair only with lines inside it, and
    lines of a new definition never with lines inside an existing one at its level."""

    def ok(j: int, i: int) -> bool:
        for it, d in matches:
            if (it.start <= j <= it.end) != (d.start <= i <= d.end):
                return False
            if (j < it.start and i > d.end) or (j > it.end and i < d.start):
                return False
        for it, others in fresh:
            if it.start <= j <= it.end and any(d.start <= i <= d.end for d in others):
                return False
        return True

    return ok


def definition_pairs(ctx: Ctx, hunk: Hunk, matches: Sequence[Match], pairs: list[Pair]) -> str:
    """Anchor the headers (and, for whole definitions, the last lines) of matched definitions.

    Returns why that pins the hunk, or "" when it adds nothing (or conflicts with the chain).
    """
    nonblank = [j for j, ln in enumerate(hunk.lines) if ln.strip()]
    extra: list[Pair] = []
    why = ""
    for it, d in matches:
        decorated = it.start < it.head
        ja, ia = (it.start, d.start) if decorated else (it.head, d.head)
        extra.append((ja, ia, not same(ctx, hunk.lines[ja], ia)))
        if whole(ctx, hunk, it, d, nonblank) and it.end > ja:
            extra.append((it.end, d.end, not same(ctx, hunk.lines[it.end], d.end)))
            why = "whole definition replaced by name"
    if not extra or not merge_pairs(pairs, extra):
        return ""
    return why or "anchored on a definition's name"


def whole(ctx: Ctx, hunk: Hunk, it: Definition, d: Definition, nonblank: Sequence[int]) -> bool:
    """Whether hunk definition `it` (matched to original `d`) is given whole: complete, and
    code follows it in the hunk, or it ends the hunk and surely ends there."""
    return it.complete and (
        it.end < nonblank[-1] or closed(ctx, hunk, it.head) or _given_whole(ctx, hunk, it, d)
    )


def closed(ctx: Ctx, hunk: Hunk, head: int) -> bool:
    """Whether a definition that ends the hunk surely ends there: braces say so (the parse is
    whole). Where indentation is the syntax nothing does (the snippet may just stop, and a
    marker at or left of the header's level may be a lazy one standing for the rest of the body
    too), so `_given_whole` looks at the definition itself."""
    return ctx.language != "python"


def _given_whole(ctx: Ctx, hunk: Hunk, it: Definition, d: Definition) -> bool:
    """Whether a definition that ends the hunk (no marker inside it after it) is given whole.

    Where indentation is the syntax a snippet that stops early parses as a whole definition
    too, however long it is; only its last line being the original definition's last line (and
    none of its inner lines: `return None` is everywhere) says it is whole.
    """
    if hunk.indent_after is not None and hunk.indent_after > width(indent_of(hunk.lines[it.head])):
        return False  # the marker after it is inside it
    last = hunk.lines[it.end]
    if same(ctx, last, d.end) and not any(same(ctx, last, i) for i in range(d.head, d.end)):
        return True
    return _ends_together(ctx, hunk, it, d)


def _ends_together(ctx: Ctx, hunk: Hunk, it: Definition, d: Definition) -> bool:
    """Whether the shown body and the original's align to their ends: a body that stops early
    leaves the original's last lines unmatched, one given whole rewrites or keeps them. Needs
    most of the original body kept, and bodies of a like size."""
    mine = [norm(ln) for ln in hunk.lines[it.head + 1 : it.end + 1] if ln.strip()]
    theirs = [k for k in ctx.index.keys[d.head + 1 : d.end + 1] if k]
    if len(theirs) < 2 or not 0.5 <= len(mine) / len(theirs) <= 2:
        return False
    ops = SequenceMatcher(None, mine, theirs, autojunk=False).get_opcodes()
    kept = sum(i2 - i1 for op, i1, i2, _, _ in ops if op == "equal")
    tag, i1, i2, j1, j2 = ops[-1]
    if tag == "replace" and not hunk.marker_after and not _rewrites(mine[i1:i2], theirs[j1:j2]):
        # A snippet that just ends (no marker) on new lines may be a diff's part that stops
        # after an insertion; a marker after the definition says the definition ends there.
        return False
    return (
        tag in ("equal", "replace")
        and i2 == len(mine)
        and j2 == len(theirs)
        and (kept >= len(theirs) / 2)
    )


def _rewrites(mine: Sequence[str], theirs: Sequence[str]) -> bool:
    """Whether the shown last lines read as a rewrite of the original's last lines (a changed
    `return`) rather than new lines after which the snippet stops short of the body's end."""
    a, b = "\n".join(mine), "\n".join(theirs)
    return SequenceMatcher(None, a, b, autojunk=False).ratio() >= 0.5


def closer_pairs(
    ctx: Ctx,
    hunk: Hunk,
    texts: Sequence[str | None],
    matched: dict[int, int],
    lo: int,
    hi: int,
    pairs: list[Pair],
) -> bool:
    """Anchor closing-bracket lines whose opening line is anchored (here or in earlier hunks)."""
    added = False
    for j, line in enumerate(hunk.lines):
        key = norm(line)
        if not key or key[0] not in _CLOSERS or any(p[0] == j for p in pairs):
            continue
        known = dict(matched)
        known.update((hunk.start + pj, pi) for pj, pi, forced in pairs if not forced)
        found = _opener(texts, hunk.start + j)
        if found is None or found[0] not in known:
            continue
        o = known[found[0]]
        c = _closer(ctx, o, found[1])
        # Formatted code closes a bracket at the indentation of the line that opened it; a
        # mismatch means the opener was elided and the scan crossed the marker into other code.
        if (
            c is None
            or ctx.index.keys[c] != key
            or not lo <= c < hi
            or ctx.index.indents[c] != ctx.index.indents[o]
            or ctx.imap.apply(indent_of(line)) != ctx.index.indents[o]
        ):
            continue
        added = merge_pairs(pairs, [(j, c, False)]) or added
    return added


def _opener(texts: Sequence[str | None], at: int) -> tuple[int, int] | None:
    """Snippet line and column of the bracket that the first character of line `at` closes."""
    need = 1
    for k in range(at - 1, -1, -1):
        text = texts[k]
        if text is None:
            continue
        for pos in range(len(text) - 1, -1, -1):
            if text[pos] in _CLOSERS:
                need += 1
            elif text[pos] in "([{":
                need -= 1
                if need == 0:
                    return k, pos
    return None


def _closer(ctx: Ctx, line: int, col: int) -> int | None:
    """Original line whose first character closes the bracket at (line, col), if it does."""
    need = 1
    for c in range(line, len(ctx.index)):
        text = ctx.brackets.code(ctx.index.keys[c])
        for pos in range(col + 1 if c == line else 0, len(text)):
            if text[pos] in "([{":
                need += 1
            elif text[pos] in _CLOSERS:
                need -= 1
                if need == 0:
                    return c if pos == 0 else None
    return None


def block_end(
    ctx: Ctx, hunk: Hunk, snippet: Sequence[str], is_marker: Sequence[bool], matched: dict[int, int]
) -> tuple[int, int] | None:
    """(first line of the block, line after it) when the hunk is the end of an anchored block.

    The marker before the hunk is deeper than some anchored header line above it, every hunk
    line is deeper too, and both the hunk and the original block end on a `return`-like
    statement at the block's body level (nothing can follow one there).
    """
    if hunk.indent_before is None:
        return None
    k = hunk.start - 1
    while k >= 0 and (
        is_marker[k] or not snippet[k].strip() or width(indent_of(snippet[k])) >= hunk.indent_before
    ):
        k -= 1
    if k < 0 or k not in matched:
        return None
    opener = snippet[k].rstrip()
    if not (opener.endswith(":") or ctx.brackets.line(opener)[0] > 0):
        return None  # not a block header: the marker is only indented more than its neighbour
    head = width(indent_of(snippet[k]))
    o = matched[k]
    if any(ln.strip() and width(indent_of(ln)) <= head for ln in hunk.lines):
        return None
    if not _ends_on_exit(ctx, hunk, o):
        # A marker after the hunk at the header's level does not close the block: lazy markers
        # sit at column 0 whatever they stand for, and a snippet that just stops keeps the rest.
        return None
    if ctx.brackets.region(hunk.lines) != (0, 0):
        return None  # the hunk stops inside a bracket: the marker after it is inside too
    end = o + 1
    top = width(ctx.index.indents[o])
    for i in range(o + 1, len(ctx.index)):
        if ctx.index.keys[i]:
            if width(ctx.index.indents[i]) <= top:
                break
            end = i + 1
    return (o + 1, end) if end > o + 1 else None


_EXITS = ("return", "raise", "throw", "break", "continue")


def _ends_on_exit(ctx: Ctx, hunk: Hunk, header: int) -> bool:
    """Whether the hunk and the original block both end on a `return`-like statement at the
    block's body level: nothing can follow one there, so the hunk ends the block."""
    body = [ln for ln in hunk.lines if ln.strip()]
    level = min(width(indent_of(ln)) for ln in body)
    last = body[-1]
    if width(indent_of(last)) != level or last.split(None, 1)[0].rstrip(";") not in _EXITS:
        return False
    top = width(ctx.index.indents[header])
    i, end = header + 1, None
    while i < len(ctx.index):
        if ctx.index.keys[i]:
            if width(ctx.index.indents[i]) <= top:
                break
            end = i
        i += 1
    if end is None:
        return False
    tail = ctx.index.keys[end]
    return (
        ctx.imap.apply(indent_of(last)) == ctx.index.indents[end]
        and tail.split(None, 1)[0].rstrip(";") in _EXITS
    )


def file_end_pairs(
    ctx: Ctx, hunk: Hunk, first: bool, last: bool, pairs: list[Pair], ok: PairOk
) -> bool:
    """Anchor an unmarked snippet end on the file's end when their lines are the same.

    A snippet whose last lines (without a marker after them) are the original's last lines
    reaches the end of the file there (some of those lines must carry identity: `return None`
    and `}` end many things); likewise at the start. Only where that replaces about as many
    original lines as the snippet has between: a short snippet does not delete everything up to
    the file's end.
    """
    index = ctx.index
    extra: list[Pair] = []
    if last and not hunk.marker_after:
        j, i = len(hunk.lines) - 1, len(index) - 1
        while j >= 0 and not hunk.lines[j].strip():
            j -= 1
        while i >= 0 and not index.keys[i]:
            i -= 1
        while j >= 0 and i >= 0 and same(ctx, hunk.lines[j], i) and ok(j, i):
            extra.append((j, i, False))
            j, i = j - 1, i - 1
        if pairs and extra and (extra[-1][1] - pairs[-1][1]) > (extra[-1][0] - pairs[-1][0]) + 2:
            extra = []
    head: list[Pair] = []
    if first and not hunk.marker_before:
        j, i = 0, 0
        while j < len(hunk.lines) and not hunk.lines[j].strip():
            j += 1
        while i < len(index) and not index.keys[i]:
            i += 1
        while j < len(hunk.lines) and i < len(index) and same(ctx, hunk.lines[j], i) and ok(j, i):
            head.append((j, i, False))
            j, i = j + 1, i + 1
        if pairs and head and (pairs[0][1] - head[-1][1]) > (pairs[0][0] - head[-1][0]) + 2:
            head = []
        extra += head
    if not any(not ctx.index.trivial(ctx.index.keys[i]) for _, i, _ in extra) and not (
        extra and not head and pairs and extra[-1][1] - pairs[-1][1] <= extra[-1][0] - pairs[-1][0]
    ):
        # `return None` / `}` at both ends is no evidence; at the end alone, after the hunk's
        # context, it is where no more original lines go than the snippet puts in their place.
        return False
    return merge_pairs(pairs, extra)


def appended_pairs(ctx: Ctx, hunk: Hunk, first: bool, last: bool, ok: PairOk) -> list[Pair]:
    """An unmarked snippet end whose shown lines begin with the file's last lines: the lines
    after those are appended to the file.

    A test file's tests end alike, so its last lines also stand at every test's end; a snippet
    that shows them after a marker, then new lines with no marker below, adds at the file's end.
    Read at the repeat before, the snippet would replace everything after it: plausible only
    where about as many lines go as the snippet brings (a last block rewritten), which stays
    in doubt.
    """
    if not last or hunk.marker_after or (first and not hunk.marker_before):
        return []
    keys = ctx.index.keys
    end = len(keys)
    while end and not keys[end - 1]:
        end -= 1
    j0 = next((j for j, ln in enumerate(hunk.lines) if ln.strip()), len(hunk.lines))
    for n in range(min(end, len(hunk.lines) - j0 - 1), 0, -1):
        i0 = end - n
        if (
            all(same(ctx, hunk.lines[j0 + t], i0 + t) and ok(j0 + t, i0 + t) for t in range(n))
            and any(ln.strip() for ln in hunk.lines[j0 + n :])
            and any(not ctx.index.trivial(keys[i]) for i in range(i0, end))
        ):
            before = ctx.index.count_run(keys[i0:end], 0, end - 1)
            new = len(hunk.lines) - j0 - n
            if before and end - (before[-1] + n) <= new + 2:
                return []
            return [(j0 + t, i0 + t, False) for t in range(n)]
    return []


def key_anchor(ctx: Ctx, hunk: Hunk, lo: int, hi: int) -> int | None:
    """The one original line in [lo, hi) whose statement key is the hunk's first statement's."""
    first = next((ln for ln in hunk.lines if ln.strip()), "")
    if is_import(first):  # an import block shown as it is to be: at the original's imports
        at = next((i for i in range(lo, hi) if is_import(ctx.index.lines[i])), None)
        rest = range(at + 1, hi) if at is not None else range(0)
        later = next(
            (i for i in rest if ctx.index.keys[i] and not is_import(ctx.index.lines[i])), hi
        )
        if at is not None and not any(is_import(ctx.index.lines[i]) for i in range(later, hi)):
            return at  # one import block only: several would leave the place in doubt
    key = statement_key(first)
    if key is None or key[0] not in ("def", "assign", "key", "import"):
        return None
    want = ctx.imap.apply(indent_of(first))
    hits = [
        i
        for i in range(lo, hi)
        if ctx.index.indents[i] == want
        and key[1] in ctx.index.keys[i]
        and statement_key(ctx.index.lines[i]) == key
    ]
    return hits[0] if len(hits) == 1 else None

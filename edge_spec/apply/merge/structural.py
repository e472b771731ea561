"""Structural merge: place every hunk of a lazy edit snippet into the original, with a verdict.

`structural_merge(original, snippet)` splits the snippet into hunks at its marker lines
(`markers`), anchors each hunk on the original (`anchors`, `pins`, `syntax`), settles its open
edges (`edges`), and reports per hunk whether it is sure (`exact`), unsure (`ambiguous`) or lost
(`unplaced`), with the reason (`doubts`). A wrong merge reported exact silently corrupts a user's
file, so every doubt downgrades: the text is still the best merge (a drafting reference for the
model) but `MergeResult.exact` is False. The merged file is parsed at the end (tree-sitter, where
a grammar is installed): a syntax error the original did not have, or a definition it now has
twice, downgrades every exact hunk.

Unmarked snippet ends. When the first hunk has no marker before it (the last none after it):

- Its first line is context: the original lines above it are kept; chat models leave an
  unchanged head out without a marker. A snippet that reaches the top this way shows the
  original's first lines. When only one or two non-blank lines are above the first context line
  the snippet may as well mean to delete them (the canonical diff convention puts no marker at
  an end the snippet reaches), so the verdict is ambiguous; closing brackets alone (a class's
  final `}`) do not count, as no edit deletes just those.
- Its first lines are changed code: they are settled like changed lines after a marker
  (`edges.resolve`: same-key statements replace their counterparts, whole new definitions are
  inserted, anything else is ambiguous). A snippet whose first (last) lines equal the
  original's first (last) lines, some of them with identity, is anchored there: it reaches that
  end of the file.
- A snippet without any marker whose context covers at least half the original is taken as the
  whole new file: its leading (trailing) changed lines replace the original lines above its
  first (below its last) context line when those are about as many. That is a best guess and
  never exact: a partial snippet that just stops reads the same. A snippet without markers that
  matches a small region (one function, say) is a partial edit of that region, exact only when
  its anchors are unique.

The same holds at the end, mirrored. Output keeps the original's line endings, final newline,
indentation style (tabs or spaces, learned from the context lines, else from the file, and then
not trusted where the unit is unclear) and, where the original has no trailing whitespace,
strips it from changed lines (the snippet's own trailing whitespace is noise in that case).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from edge_spec.apply.languages import canonical
from edge_spec.apply.merge.anchors import (
    Chain,
    LineIndex,
    candidate_chains,
    find_blocks,
    indent_of,
    norm,
    pick_ordered,
)
from edge_spec.apply.merge.context import Ctx
from edge_spec.apply.merge.markers import Hunk, classify_markers, split_hunks
from edge_spec.apply.merge.pins import confine, new_definitions
from edge_spec.apply.merge.placement import Env, HunkStatus, Placement, place
from edge_spec.apply.merge.structure import Brackets, IndentMap, indent_style, learn_indent
from edge_spec.apply.merge.syntax import (
    definitions,
    doubled_definition,
    encode_lines,
    error_line,
    guess_language,
    hunk_definitions,
    parse,
    reparse,
)

_WHOLE_COVER = 0.5


@dataclass(frozen=True)
class HunkVerdict:
    """How one hunk was placed. Spans: snippet lines 1-based inclusive, original 0-based [a, b)."""

    index: int
    status: HunkStatus
    reason: str
    snippet_span: tuple[int, int]
    original_span: tuple[int, int] | None


@dataclass(frozen=True)
class Edit:
    """Original lines [start, end) (0-based) replaced by `lines` (no line endings)."""

    start: int
    end: int
    lines: tuple[str, ...]


@dataclass(frozen=True)
class MergeResult:
    """The merged text (always the best merge) and a verdict per hunk."""

    text: str
    hunks: tuple[HunkVerdict, ...]
    language: str
    # Per hunk, what replaced which original lines (0-based [start, end), LF lines): the pieces
    # `text` is assembled from, so a caller can rebuild any part of it (`apply.region`).
    edits: tuple[Edit, ...] = ()

    @property
    def exact(self) -> bool:
        """Every hunk placed for sure (and there is at least one)."""
        return bool(self.hunks) and all(h.status == "exact" for h in self.hunks)


def detect_language(lang: str = "", path: str | None = None) -> str:
    """The language name from an explicit `lang`, else from the path's extension ("" unknown)."""
    return canonical(lang, path)


def split_original(text: str) -> tuple[list[str], str, bool]:
    """Lines without endings, the line ending to write, and whether the text ends with one."""
    final = text.endswith("\n")
    lines = text.split("\n")
    lines.pop() if final or not text else None
    ended = lines if final else lines[:-1]
    if ended and all(ln.endswith("\r") for ln in ended):
        return [ln[:-1] for ln in ended] + lines[len(ended) :], "\r\n", final
    return lines, "\n", final


def _snippet_lines(text: str) -> list[str]:
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    return [_blank(lines, k) if ln and not ln.strip() else ln for k, ln in enumerate(lines)]


def _blank(lines: Sequence[str], k: int) -> str:
    """A blank line's blanks, kept where they are an editor's: the indentation of the code line
    next to it (stray blanks a paste or a chat UI left are no part of the edit)."""
    near = [
        next((ln for ln in lines[k + 1 :] if ln.strip()), None),
        next((ln for ln in reversed(lines[:k]) if ln.strip()), None),
    ]
    indents = {ln[: len(ln) - len(ln.lstrip(" \t"))] for ln in near if ln is not None}
    return lines[k] if lines[k] in indents else ""


def structural_merge(
    original: str, snippet: str, lang: str = "", path: str | None = None
) -> MergeResult:
    """Merge a lazy edit snippet into the original file, with a verdict per hunk.

    >>> r = structural_merge("a = 1\\nb = 2\\nc = 3\\n", "# ...\\nb = 20\\nc = 3\\n", "python")
    >>> r.text, r.exact
    ('a = 1\\nb = 20\\nc = 3\\n', True)
    """
    olines, eol, final = split_original(original)
    # No name and no known extension (stdin, a temp file): the content, where it is unmistakable.
    language = detect_language(lang, path) or guess_language(olines)
    slines = _snippet_lines(snippet)
    index = LineIndex(olines)
    is_marker = classify_markers(slines, index, language)
    hunks = split_hunks(slines, is_marker)
    if not hunks:
        return MergeResult(original, (), language)
    if not olines:
        return _into_empty(hunks, any(is_marker), eol, language)
    tree = parse(language, encode_lines(olines))
    defs = definitions(language, tree)
    ctx = Ctx(
        index,
        language,
        Brackets(language),
        IndentMap(),
        defs,
        {(d.kind, d.name) for d in defs},
        keep_trailing=any(ln != ln.rstrip() for ln in olines) or not _pasted(snippet, eol),
        snippet=snippet,
    )
    chosen = pick_ordered([_candidates(ctx, h) for h in hunks])
    ctx.imap = learn_indent(_indent_pairs(hunks, chosen, index) + _definition_indents(ctx, hunks))
    style, unit, sure = indent_style(olines)
    if style == "tabs":  # tabs files take the snippet's unit of spaces
        _, unit, sure = indent_style(slines)
    ctx.style, ctx.style_sure = (style, unit), sure
    ctx.literal = (
        style == "spaces" and ctx.imap.kind in ("same", "to_spaces") and _mixed_indent(slines)
    )
    whole = not any(is_marker) and _covers(chosen[0], index)
    placements = _place_all(ctx, hunks, chosen, slines, is_marker, whole)
    out = assemble(olines, placements)
    verdicts = [
        HunkVerdict(
            h.index,
            p.status,
            p.reason,
            h.span,
            None if p.status == "unplaced" else (p.start, p.end),
        )
        for h, p in zip(hunks, placements, strict=True)
    ]
    if ctx.guessed:
        verdicts = _downgrade(
            verdicts,
            "changed lines re-indented to the file's style by a "
            "guessed unit (no context line shows it)",
        )
    verdicts = _validate(language, tree, ctx, placements, verdicts)
    text = eol.join(out) + (eol if final or not original else "")
    edits = tuple(Edit(p.start, p.end, p.lines) for p in placements)
    return MergeResult(text, tuple(verdicts), language, edits)


def _mixed_indent(lines: Sequence[str]) -> bool:
    """Whether some code lines start with a tab and others with spaces, or some line's
    indentation has a tab after spaces: an editor that converts indentation leaves neither."""
    code = [ln for ln in lines if ln.strip()]
    firsts = {ln[:1] for ln in code}
    return ("\t" in firsts and " " in firsts) or any(
        " \t" in ln[: len(ln) - len(ln.lstrip(" \t"))] for ln in code
    )


def _pasted(snippet: str, eol: str) -> bool:
    """Whether the snippet's line ends are not the file's: it went through a paste (a chat UI,
    another editor) that also leaves stray trailing blanks, which then are not the edit's."""
    return ("\r\n" in snippet) != (eol == "\r\n")


def _into_empty(hunks: Sequence[Hunk], marked: bool, eol: str, language: str) -> MergeResult:
    lines = [ln for h in hunks for ln in h.lines]
    status: HunkStatus = "ambiguous" if marked else "exact"
    reason = (
        "markers refer to an empty original"
        if marked
        else "the original is empty: the snippet is the file"
    )
    verdicts = tuple(HunkVerdict(h.index, status, reason, h.span, (0, 0)) for h in hunks)
    return MergeResult(eol.join(lines) + eol, verdicts, language)


def _candidates(ctx: Ctx, hunk: Hunk) -> list[Chain]:
    """The hunk's context chains over the whole original. The lines of a whole new definition
    do not pair inside an existing one (a new function copied from an old one's body would
    otherwise stand where the old one is, and bound the hunks before it)."""
    keys = [norm(ln) for ln in hunk.lines]
    index = ctx.index
    inside = confine([], new_definitions(ctx, hunk))
    return candidate_chains(find_blocks(keys, index, 0, len(index), inside), index, keys)


def _indent_pairs(
    hunks: Sequence[Hunk], chosen: Sequence[Chain | None], index: LineIndex
) -> list[tuple[str, str]]:
    pairs = []
    for h, chain in zip(hunks, chosen, strict=True):
        for b in chain.blocks if chain else ():
            for k in range(b.n):
                if index.keys[b.i + k]:
                    pairs.append((indent_of(h.lines[b.j + k]), index.indents[b.i + k]))
    return pairs


def _definition_indents(ctx: Ctx, hunks: Sequence[Hunk]) -> list[tuple[str, str]]:
    """Indentation pairs from whole definitions of the snippet whose name and kind match one
    original definition: chat models print a method at column 0, and its header (with every
    line under it) says how the snippet's indentation maps to the file's."""
    pairs: list[tuple[str, str]] = []
    for h in hunks:
        for it in hunk_definitions(ctx.language, h.lines) or ():
            found = [d for d in ctx.defs if (d.kind, d.name) == (it.kind, it.name)]
            if it.kind in ("function", "class") and it.complete and len(found) == 1:
                n = sum(1 for ln in h.lines[it.start : it.end + 1] if ln.strip())
                pairs += [(indent_of(h.lines[it.head]), ctx.index.indents[found[0].head])] * n
    return pairs


def _covers(chain: Chain | None, index: LineIndex) -> bool:
    """Whether a marker-free snippet's context spans most of the original (the whole file)."""
    if chain is None:
        return False
    matched = sum(1 for b in chain.blocks for k in range(b.n) if index.keys[b.i + k])
    return matched >= _WHOLE_COVER * sum(1 for k in index.keys if k)


def _place_all(
    ctx: Ctx,
    hunks: Sequence[Hunk],
    chosen: Sequence[Chain | None],
    slines: Sequence[str],
    is_marker: Sequence[bool],
    whole: bool,
) -> list[Placement]:
    texts = [
        None if m else ctx.brackets.code(norm(ln)) for ln, m in zip(slines, is_marker, strict=True)
    ]
    env = Env(0, len(ctx.index), True, len(hunks) == 1, whole, list(slines), list(is_marker), texts)
    out: list[Placement] = []
    for k, hunk in enumerate(hunks):
        nxt = next((c.start for c in chosen[k + 1 :] if c is not None), len(ctx.index))
        env.hi, env.first, env.last = max(nxt, env.lo), k == 0, k == len(hunks) - 1
        placed = place(ctx, hunk, env)
        out.append(placed)
        if placed.status != "unplaced":
            env.lo = placed.end
            env.matched.update((hunk.start + j, i) for j, i in placed.pairs)
    return out


def assemble(olines: Sequence[str], placements: Sequence[Placement | Edit]) -> list[str]:
    """The original lines with each placement's lines in place of its span, in order."""
    out: list[str] = []
    pos = 0
    for p in placements:
        out += olines[pos : max(pos, p.start)]
        out += p.lines
        pos = max(pos, p.end)
    out += olines[pos:]
    return out


def _validate(
    language: str, tree: Any, ctx: Ctx, placements: Sequence[Placement], verdicts: list[HunkVerdict]
) -> list[HunkVerdict]:
    """Downgrade exact hunks when the merged file breaks a parse or duplicates a definition;
    where no definition can be seen (no grammar, or a file of statements or data), when it
    holds a block of new lines twice: the stand-in for a duplicated definition (with one, tests
    that repeat setup lines would make it too strict)."""
    if not any(v.status == "exact" for v in verdicts):
        return verdicts
    twice = _doubled_block(ctx, placements) if tree is None or not ctx.defs else None
    if twice is not None:
        return _downgrade(
            verdicts,
            f"new lines also stand at original line {twice + 1}: moved "
            "code whose old copy is kept?",
        )
    if tree is None or tree.root_node.has_error:
        return verdicts  # the original does not parse: the check says nothing
    merged = reparse(
        language, tree, ctx.index.lines, [(p.start, p.end, p.lines) for p in placements]
    )
    reason = None
    bad = error_line(merged)
    if bad is not None:
        reason = f"the merged file has a syntax error at line {bad + 1} (the original parses)"
    else:
        dup = doubled_definition(
            ctx.defs,
            ctx.index.lines,
            definitions(language, merged),
            assemble(ctx.index.lines, placements),
        )
        if dup is not None:
            reason = f"the merge defines {dup[0]} twice"
    return verdicts if reason is None else _downgrade(verdicts, reason)


_MOVED = 3  # distinctive lines in a row that say a block was moved, not written anew


def _doubled_block(ctx: Ctx, placements: Sequence[Placement]) -> int | None:
    """An original line where a run of a hunk's new (not context) lines already stands, outside
    what the hunk replaces: the snippet moved that code, and the merge would keep both copies."""
    index = ctx.index
    for p in placements:
        kept = {i for _, i in p.pairs}
        context = {index.lines[i] for i in kept}
        keys = [norm(ln) if ln not in context else None for ln in p.lines]
        runs = [[x or "" for x in keys[k : k + _MOVED]] for k in range(len(keys) - _MOVED + 1)]
        runs = [r for r in runs if all(x and not index.trivial(x) for x in r)]
        runs += _new_blocks(index, keys)
        for run in runs:
            for at in index.count_run(run, 0, len(index)):
                if not p.start <= at < p.end and any(
                    _kept(placements, i) for i in range(at, at + len(run))
                ):
                    return at
    return None


def _kept(placements: Sequence[Placement], i: int) -> bool:
    """Whether original line `i` stays in the merged file: outside every placement's span, or
    context of the one that spans it (a moved block's old copy that another hunk deletes is
    gone)."""
    for q in placements:
        if q.start <= i < q.end:
            return any(k == i for _, k in q.pairs)
    return True


def _new_blocks(index: LineIndex, keys: Sequence[str | None]) -> list[list[str]]:
    """Each stretch of new lines (None marks context), blank lines at its ends dropped, with at
    least two distinctive lines (a whole small function: `f() {`, its line, `}`)."""
    out: list[list[str]] = []
    block: list[str] = []
    for key in [*keys, None]:
        if key is not None:
            block.append(key)
            continue
        while block and not block[-1]:
            block.pop()
        while block and not block[0]:
            block.pop(0)
        if sum(1 for x in block if x and not index.trivial(x)) >= 2:
            out.append(block)
        block = []
    return out


def _downgrade(verdicts: Sequence[HunkVerdict], reason: str) -> list[HunkVerdict]:
    return [
        replace(v, status="ambiguous", reason=reason) if v.status == "exact" else v
        for v in verdicts
    ]

"""The placements of an unsure hunk that the answer check allows.

When the merge is unsure of a hunk, the readings it hesitates between mostly differ in where
the hunk's span ends (`merge.candidates`), or where it stands when its context repeats. Each
reading is a whole file (the other hunks as the merge put them); the answer check keeps those
the snippet and the original allow. The target chooses among them (`apply.choose`); a model
that rewrites a window holding all of them was free to write any, so an answer equal to the
merge's own reading there is the target's, not a copy of the guess (`apply.region`).
"""

from __future__ import annotations

from collections.abc import Sequence

from edge_spec.apply.check.verdict import unplaced_changes
from edge_spec.apply.merge import Edit, MergeResult, assemble, split_original
from edge_spec.apply.merge.candidates import (
    alternative_edits,
    doubts_where,
    relocated_edits,
    to_file_ends,
)
from edge_spec.apply.merge.syntax import Definition, definitions, loses_definitions, parse


def _text(lines: Sequence[str], eol: str, final: bool) -> str:
    return eol.join(lines) + (eol if final else "")


def content(text: str) -> tuple[str, ...]:
    """A file's non-blank lines, whitespace runs collapsed: what the check tells apart."""
    return tuple(" ".join(ln.split()) for ln in text.splitlines() if ln.strip())


def readings(
    original: str, update: str, merge: MergeResult, hunk: int, reach: int, limit: int | None = None
) -> list[Edit]:
    """The placements of `hunk` the answer check passes, one per distinct content (the one
    nearest the merge's span: placements that differ only in blank lines read alike), the
    merge's own first when it passes; stops past `limit` of them."""
    olines, eol, final = split_original(original)
    h = merge.hunks[hunk]
    own = merge.edits[hunk]
    alts = sorted(
        alternative_edits(merge, hunk, olines, reach),
        key=lambda e: abs(e.start - own.start) + abs(e.end - own.end),
    )
    if doubts_where(h.reason):
        alts += relocated_edits(merge, hunk, olines)
    alts += to_file_ends(merge, hunk, len(olines), h.reason)
    tree = parse(merge.language, original.encode("utf-8"))
    before = definitions(merge.language, tree) if tree is not None else []
    seen: set[tuple[str, ...]] = set()
    ok: list[Edit] = []
    passed: list[Edit] = []
    for e in alts:
        edits = [e if i == hunk else x for i, x in enumerate(merge.edits)]
        text = _text(assemble(olines, edits), eol, final)
        if content(text) in seen:
            continue
        seen.add(content(text))
        if unplaced_changes(original, update, text, merge):
            continue
        passed.append(e)
        if not _loses(merge.language, before, text, update):
            ok.append(e)
        if limit is not None and len(ok) > limit:
            break
    # A lone reading left is no choice for the target to make: then the check's readings all.
    return ok if len(ok) > 1 else passed[: None if limit is None else limit + 1]


def _loses(language: str, before: Sequence[Definition], text: str, update: str) -> bool:
    """Whether a reading deletes original definitions the snippet never names (more than it
    brings under new names): no reading of a lazy snippet while another one keeps them."""
    if not before:
        return False
    tree = parse(language, text.encode("utf-8"))
    return tree is not None and loses_definitions(before, definitions(language, tree), update)

"""An open tail edge framed by the closers of the blocks around it.

`ctx / new lines / }  }` (then a marker, or the snippet's end): the closing brackets after the
new lines are the ends of the blocks the context stands in, which the original's brackets place
exactly: the first line after the context that closes below its depth. Such closers are weak
anchors by their text (every block ends in `}`), but not by their structure: between the
context and the end of the enclosing block there is one place they can be. What the original
has between the context and them is what the new lines replace.

Trusted only where the new lines read as a rewrite of those original lines, not a cut: every
original line there has a counterpart among the new lines (equal, or alike). A snippet that
stops the block early (its author left out the rest without a marker) fails that and stays
unsure.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from edge_spec.apply.merge.anchors import LineIndex, indent_of, norm
from edge_spec.apply.merge.structure import Brackets, IndentMap

_CLOSERS = frozenset(")]};,")
_ALIKE = 0.6  # SequenceMatcher ratio at which an original line counts as rewritten, not cut


def _closer(brackets: Brackets, line: str) -> bool:
    code = brackets.code(line).strip()
    return bool(code) and set(code) <= _CLOSERS and brackets.line(line)[0] < 0


def _block_end(index: LineIndex, brackets: Brackets, boundary: int, limit: int) -> int | None:
    """The first original line from `boundary` that closes below the boundary's depth."""
    depth = 0
    for k in range(boundary, limit):
        net, low = brackets.line(index.lines[k])
        if depth + low < 0:
            return k
        depth += net
    return None


def _rewritten(old: Sequence[str], new: Sequence[str]) -> bool:
    """Whether every nonblank, non-bracket original line has a counterpart among `new`."""
    keys = [norm(ln) for ln in new if norm(ln)]
    for line in old:
        key = norm(line)
        if not key or set(key) <= _CLOSERS | set("([{ "):
            continue
        if key in keys:
            continue
        if not any(SequenceMatcher(None, key, k, autojunk=False).ratio() >= _ALIKE for k in keys):
            return False
    return True


def closing_frame(
    index: LineIndex,
    brackets: Brackets,
    imap: IndentMap,
    core: Sequence[str],
    boundary: int,
    limit: int,
) -> int | None:
    """How many original lines from `boundary` a tail edge's `core` replaces, where its last
    lines are the closers of the blocks around the boundary (None: the edge is not so framed)."""
    run = 0
    while run < len(core) and _closer(brackets, core[len(core) - 1 - run]):
        run += 1
    # The run may close the new lines' own blocks first: the frame is the part after them.
    for n in range(run, 0, -1):
        body = list(core[: len(core) - n])
        depth, low = brackets.region([imap.line(ln) for ln in body])
        if body and not depth and low >= 0:
            break
    else:
        return None
    end = _block_end(index, brackets, boundary, limit)
    if end is None or end + n > limit:
        return None
    for t, line in enumerate(core[len(core) - n :]):
        k = end + t
        if norm(line) != index.keys[k] or imap.apply(indent_of(line)) != index.indents[k]:
            return None
    if not _rewritten(index.lines[boundary:end], body):
        return None
    return end + n - boundary

"""What every step that settles a hunk's edges shares: the merge's view of the original and the
snippet's style (`Ctx`), a settled edge (`Edge`), and the helpers both edge readings use."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from edge_spec.apply.merge.anchors import LineIndex, norm
from edge_spec.apply.merge.structure import Brackets, IndentMap, restyle, width
from edge_spec.apply.merge.syntax import Definition

# How far from a boundary original lines are read for an edge's reading.
WINDOW = 60
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
    snippet: str = ""  # the snippet's text, for the definitions it speaks of

    def speaks_of(self, d: Definition) -> bool:
        """Whether the snippet shows definition `d`'s opening line or names it other than in
        a call (a comment, a reference): a reading that deletes `d` may then be meant. A call
        says the definition is still there."""
        head = norm(self.index.lines[d.head])
        if any(norm(ln) == head for ln in self.snippet.splitlines()):
            return True
        short = re.escape(d.name.rsplit(".", 1)[-1])
        return re.search(rf"(?<!\w){short}(?!\w)(?!\s*\()", self.snippet) is not None

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


def split_blanks(new: Sequence[str], tail: bool) -> tuple[list[str], int]:
    core = list(new)
    blanks = 0
    while core and not (core[-1] if tail else core[0]).strip():
        core.pop(-1 if tail else 0)
        blanks += 1
    return core, blanks


def region(ctx: Ctx, boundary: int, take: int, tail: bool) -> list[str]:
    lines = ctx.index.lines
    return lines[boundary : boundary + take] if tail else lines[boundary - take : boundary]


def indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def blank_run(ctx: Ctx, boundary: int, take: int, blanks: int, avail: int, tail: bool) -> int:
    """How many of the edge's outer blank lines are the original's blank lines there."""
    k = 0
    while k < min(blanks, avail - take):
        i = boundary + take + k if tail else boundary - take - k - 1
        if not (0 <= i < len(ctx.index)) or ctx.index.keys[i]:
            break
        k += 1
    return k

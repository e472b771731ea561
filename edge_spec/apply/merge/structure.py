"""Language-agnostic structure of lines: bracket balance, indentation maps, statement keys.

These let the merge reject placements no correct edit could produce. Where the original is
`P + R + S` and the new file `P + X + S`, and both files balance their brackets, the region `R`
and its replacement `X` have the same net bracket depth, and neither dips below its start more
than the other (`viable`). A placement whose replaced region crosses out of a function that the
replacement stays inside fails that test, as does one whose region would swallow the end of a
block the snippet keeps.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from edge_spec.apply.languages import language as lookup
from edge_spec.apply.merge.anchors import indent_of

_DQ = r'"(?:\\.|[^"\\])*"'
_SQ = r"'(?:\\.|[^'\\])*'"
_CHAR = r"'(?:\\.[^']*|[^'\\])'"  # char literals only: Rust lifetimes and C quotes are not strings
_BT = r"`(?:\\.|[^`\\])*`"
# Block comments, line by line: one opening on the line (to its close or the line's end), and
# a doc comment's continuation lines (` * text`, ` */`), whose brackets are prose.
_BLOCK = r"/\*.*?(?:\*/|$)|^\s*\*(?=\s|/|$).*$"
_STRIP: dict[str, re.Pattern[str]] = {
    "python": re.compile(f"{_DQ}|{_SQ}|#.*$"),
    "js": re.compile(f"{_DQ}|{_SQ}|{_BT}|//.*$|{_BLOCK}"),
    "go": re.compile(f"{_DQ}|{_CHAR}|{_BT}|//.*$|{_BLOCK}"),
    "c": re.compile(f"{_DQ}|{_CHAR}|//.*$|{_BLOCK}"),
    "": re.compile(f"{_DQ}|{_CHAR}"),
}
_OPEN, _CLOSE = "([{", ")]}"


class Brackets:
    """Per-line bracket profiles (net depth change, lowest depth reached), strings ignored."""

    def __init__(self, language: str) -> None:
        row = lookup(language)
        self._strip = _STRIP[row.lexer if row else ""]
        self._cache: dict[str, tuple[int, int]] = {}
        self._code: dict[str, str] = {}

    def code(self, text: str) -> str:
        """The text with strings and line comments blanked out, as brackets are counted."""
        hit = self._code.get(text)
        if hit is None:
            hit = self._code[text] = self._strip.sub("", text)
        return hit

    def line(self, text: str) -> tuple[int, int]:
        hit = self._cache.get(text)
        if hit is None:
            depth = low = 0
            for ch in self.code(text):
                if ch in _OPEN:
                    depth += 1
                elif ch in _CLOSE:
                    depth -= 1
                    low = min(low, depth)
            hit = self._cache[text] = (depth, low)
        return hit

    def region(self, lines: Sequence[str]) -> tuple[int, int]:
        depth = low = 0
        for text in lines:
            d, lo = self.line(text)
            low = min(low, depth + lo)
            depth += d
        return depth, low


def balanced_core(brackets: Brackets, lines: Sequence[str]) -> tuple[int, int]:
    """Lines [a, b) of a hunk past the tail of a block it starts inside (up to the last line
    closing below every depth before it) and before a sibling block it leaves open (from the
    blank line above that block's opening, its header with it): the part that parses on its
    own. A hunk that stops inside the body of its own last block keeps its end."""
    depth = low = a = 0
    after: list[int] = []
    for k, text in enumerate(lines):
        net, dip = brackets.line(text)
        if depth + dip < low:
            low, a = depth + dip, k + 1
        depth += net
        after.append(depth)
    base = after[a - 1] if a else 0
    end = next((k + 1 for k in range(len(lines) - 1, a - 1, -1) if after[k] == base), a)
    if end == len(lines):
        return a, end
    # The open block's header (a signature, attributes) goes with it, back to a blank line;
    # cut there only when the open block is a sibling of what comes before, not its body.
    k = end - 1
    while k > a and lines[k].strip():
        k -= 1
    inner = [width(indent_of(ln)) for ln in lines[a:k] if ln.strip()]
    tail = next((ln for ln in lines[k:] if ln.strip()), "")
    if k > a and inner and width(indent_of(tail)) <= min(inner):
        return a, k
    return a, len(lines)


def width(indent: str) -> int:
    return len(indent.expandtabs(4))


def _min_width(lines: Sequence[str]) -> int | None:
    widths = [width(ln[: len(ln) - len(ln.lstrip())]) for ln in lines if ln.strip()]
    return min(widths) if widths else None


def viable(
    new: Sequence[str], old: Sequence[str], brackets: Brackets, around: int | None = None
) -> bool:
    """Whether replacing original lines `old` by snippet lines `new` can be a correct edit.

    `new` must already carry the original's indentation style; `around` is the smallest
    indentation width of the original context lines next to the region.
    """
    dn, ln = brackets.region(new)
    do, lo = brackets.region(old)
    if dn != do or min(ln, 0) != min(lo, 0):
        return False
    wo = _min_width(old)
    if wo is None:
        return True
    bounds = [w for w in (_min_width(new), around) if w is not None]
    return not bounds or wo >= min(bounds)


@dataclass(frozen=True)
class IndentMap:
    """How the snippet's indentation maps to the original's (tabs for spaces, a shift)."""

    kind: str = "same"  # same | to_tabs | to_spaces | add | drop
    unit: int = 0
    prefix: str = ""

    def apply(self, indent: str) -> str:
        if self.kind == "to_tabs":
            total = indent.count("\t") * self.unit + indent.count(" ")
            return "\t" * (total // self.unit) + " " * (total % self.unit)
        if self.kind == "to_spaces":
            return indent.replace("\t", " " * self.unit)
        if self.kind == "add":
            return self.prefix + indent
        if self.kind == "drop":
            return indent[len(self.prefix) :] if indent.startswith(self.prefix) else indent
        return indent

    def line(self, text: str) -> str:
        """A snippet line re-indented in the original's style."""
        body = text.lstrip(" \t")
        return self.apply(text[: len(text) - len(body)]) + body if body else ""


def _explains(m: IndentMap, snip: str, orig: str) -> bool:
    if m.kind == "drop" and not snip.startswith(m.prefix):
        return False  # a shift moves every line; one that leaves a line alone does not explain it
    return m.apply(snip) == orig


def learn_indent(pairs: Sequence[tuple[str, str]]) -> IndentMap:
    """The map that explains (snippet, original) indentation pairs, `same` unless another explains
    nearly all of them (re-indented code in an edit must not look like a style change)."""
    if not pairs:
        return IndentMap()
    maps = [IndentMap()]
    maps += [IndentMap("to_tabs", k) for k in (2, 4, 8)]
    maps += [IndentMap("to_spaces", k) for k in (2, 4, 8)]
    shifts = Counter((s, o) for s, o in pairs if s != o)
    for (s, o), _ in shifts.most_common(2):
        if o.endswith(s):
            maps.append(IndentMap("add", prefix=o[: len(o) - len(s)]))
        elif s.endswith(o):
            maps.append(IndentMap("drop", prefix=s[: len(s) - len(o)]))
    scores = [sum(_explains(m, s, o) for s, o in pairs) for m in maps]
    best = max(range(len(maps)), key=lambda k: (scores[k], k == 0))
    if scores[best] > scores[0] and scores[best] >= 0.9 * len(pairs):
        return maps[best]
    return maps[0]


def indent_style(lines: Sequence[str]) -> tuple[str, int, bool]:
    """("tabs" | "spaces" | "", unit, sure): how the lines indent and by how many spaces a level.

    The unit is the greatest common divisor of the space indentation widths; it is sure when
    at least two different widths show it (a file indented only by 8 may have 4-space levels).
    """
    tabs = spaces = 0
    widths: set[int] = set()
    for ln in lines:
        first = ln[:1]
        if first == "\t":
            tabs += 1
        elif first == " " and ln.strip():
            spaces += 1
            w = len(ln) - len(ln.lstrip(" "))
            if ln[w : w + 1] != "\t":
                widths.add(w)
    style = "tabs" if tabs and not spaces else "spaces" if spaces and not tabs else ""
    unit = 0
    for w in widths:
        unit = math.gcd(unit, w)
    return style, unit if unit >= 2 else 4, len(widths) >= 2 and unit >= 2


def restyle(line: str, style: str, unit: int) -> str:
    """Re-indent a line whose indentation uses the character the file never indents with."""
    ind = line[: len(line) - len(line.lstrip(" \t"))]
    if style == "spaces" and "\t" in ind:
        return ind.replace("\t", " " * unit) + line[len(ind) :]
    if style == "tabs" and " " in ind and unit:
        n = ind.count("\t") * unit + ind.count(" ")
        return "\t" * (n // unit) + " " * (n % unit) + line[len(ind) :]
    return line


_DEF = re.compile(
    r"^(?:export\s+)?(?:default\s+)?(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?"
    r"(?:def|class|function\*?|func|fn|struct|enum|interface|trait|type|mod|module|namespace)\s+"
    r"(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)"
)
_METHOD = re.compile(r"^(?:[\w<>\[\],.?]+\s+)+([A-Za-z_]\w*)\s*\([^;]*$")
_ASSIGN = re.compile(
    r"^(?:(?:const|let|var|final|static|pub|mut|private|public|protected|readonly|export)\s+)*"
    r"([A-Za-z_$][\w$.]*(?:\[[^\]]*\])?)\s*(?::[^=]+?)?\s*(?::=|=)(?!=)"
)
_KEYED = re.compile(r"^[\"']?([\w$-]+)[\"']?\s*:\s*\S")
_IMPORT = re.compile(
    r"^(?:from\s+(\S+)\s+import\b|import\s+([\w.]+)\s*$|import\b.*\bfrom\s+"
    r"['\"]([^'\"]+)['\"])"
)
_NOT_NAMES = frozenset(
    "return throw new else if while for switch case default yield await "
    "raise assert del print not and or in is lambda elif except".split()
)


def statement_key(line: str) -> tuple[str, str] | None:
    """What a statement defines or sets, when two versions of it can be told to be one line.

    An edit rarely inserts a second definition, assignment, mapping key or import of the same
    name right next to the first, or a `return` right before another one: a changed line with the
    same key as its neighbour in the original is that neighbour, modified.
    """
    text = line.strip()
    if not text:
        return ("blank", "")
    for kind, pattern in (("def", _DEF), ("import", _IMPORT)):
        m = pattern.match(text)
        if m:
            return (kind, next(g for g in m.groups() if g))
    first = text.split(None, 1)[0].rstrip("(:;")
    if first in ("return", "return;"):
        return ("return", "")
    if first in _NOT_NAMES:
        return None
    for kind, pattern in (("assign", _ASSIGN), ("key", _KEYED)):
        m = pattern.match(text)
        if m and m.group(1) not in _NOT_NAMES:
            return (kind, m.group(1))
    m = _METHOD.match(text)
    if m and text.rstrip().endswith(("{", ")")):
        return ("def", m.group(1))
    return None


def statements(lines: Sequence[str], brackets: Brackets) -> list[tuple[int, int]]:
    """Split lines into statements [a, b): a line, or lines until its brackets close."""
    out: list[tuple[int, int]] = []
    k = 0
    while k < len(lines):
        depth, end = 0, k
        while end < len(lines):
            depth += brackets.line(lines[end])[0]
            end += 1
            if depth <= 0 or end - k >= 40:
                break
        if depth > 0:  # an unclosed opener (a block header): the header alone
            end = k + 1
        out.append((k, end))
        k = end
    return out


_IMPORT_LINE = re.compile(
    r"(?:import\s|from\s+\S+\s+import\s|use\s|using\s|#\s*include\s|require(?:_relative)?[\s(]"
    r"|extern\s+crate\s)"
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NOT_IMPORTED = frozenset(
    "import from use using include require require_relative extern crate "
    "open static as self super crate".split()
)


def is_import(line: str) -> bool:
    """Whether a line is an import statement (of any of the languages the table knows)."""
    return bool(_IMPORT_LINE.match(line.strip()))


def imports_cover(new: Sequence[str], old: Sequence[str]) -> bool:
    """Whether every import in `old` is still imported by `new`: its last name appears there,
    or a wildcard import of a package its path starts with does (`java.util.*` covers
    `java.util.Map`, `use std::{fmt, io}` covers `use std::fmt`)."""
    have = {w for ln in new for w in _WORD.findall(ln)}
    wild = [_WORD.findall(ln) for ln in new if "*" in ln]
    for ln in old:
        if not ln.strip():
            continue
        words = [w for w in _WORD.findall(ln) if w not in _NOT_IMPORTED]
        if not words:
            return False
        if words[-1] not in have and not any(
            w and words[: len(w) - 1] == [x for x in w if x not in _NOT_IMPORTED][: len(w) - 1]
            for w in wild
        ):
            return False
    return True

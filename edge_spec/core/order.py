"""The order a merged file keeps: the original's lines in their order, the snippet's in theirs.

A merged file is the original with each hunk of the snippet put in its place, so read against
the original it copies runs of lines, writes the snippet's hunks as runs, and skips original
lines only where the snippet says so. This module follows the answer's complete lines
(stripped; blank lines do not count) over the original's non-blank lines. A reading is the
original line the last copy was (-1: none yet) and whether snippet lines were written since;
repeated lines keep several readings open. A line of the answer is

- the next original line after a reading's (a copy);
- a snippet line written as new code: the first line of a hunk (after a marker, or the
  snippet's first), or the line that follows the one just written in the snippet: a hunk is
  written as one run;
- an original line further on (a skip), which must be either the line that follows the one
  just written in the snippet, reached after snippet lines or from a line the snippet shows
  (the hunk's own context says where it resumes, or that the lines between two of its context
  lines are gone), or, right after the last line of a hunk (a line a marker or the snippet's
  end follows), a line that closes what was skipped: the skipped lines are all indented deeper
  than it (the rest of the block the hunk ends in), or none is shallower than it and those at
  the skipped lines' own depth are no more than the hunk's lines at its depth (a hunk without
  context in the original replaces as many blocks as it has, as a method replaced by name).

The answer may end only once the last original line is copied, or, for a snippet that ends
without a marker (its end is the file's end), right after the snippet's last line. It does not
wait for snippet lines left out: their place is behind the answer, and one written at the end
is no better than none. Every expected file of the dev sets keeps these rules; a lazy answer
that jumps from the snippet to the end of the file does not. When no reading is left (a line
these rules do not allow got through), the order stops constraining.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

_WS = b" \t"
Reading = tuple[int, bool]  # (last copied original line, snippet lines written since)


@dataclass(frozen=True)
class OrderState:
    """The readings of the answer so far (None: the order no longer constrains) and its last
    line (stripped)."""

    pos: frozenset[Reading] | None = frozenset({(-1, False)})
    last: bytes = b""


class LineOrder:
    """The rules above for one original (its raw lines) and one snippet (its lines in order,
    each with whether it is a marker)."""

    def __init__(self, original: Iterable[bytes], snippet: Iterable[tuple[bytes, bool]]) -> None:
        raw = [ln for ln in original if ln.strip(_WS)]
        self.lines = [ln.strip(_WS) for ln in raw]
        self._depth = [_depth(ln) for ln in raw]
        self._at: dict[bytes, list[int]] = {}
        for j, key in enumerate(self.lines):
            self._at.setdefault(key, []).append(j)
        marked = [(ln, marker) for ln, marker in snippet if ln.strip(_WS)]
        items = [(ln.strip(_WS), marker) for ln, marker in marked]
        self.shown = [key for key, marker in items if not marker]
        self._shown = frozenset(self.shown)
        self._open_end = bool(items) and not items[-1][1]  # the snippet's end is the file's
        # A hunk's last line -> the most lines a hunk ending with it has at its own depth.
        self._hunk_ends: dict[bytes, int] = {}
        hunk: list[bytes] = []
        self._starts: set[bytes] = set()  # lines that open a hunk somewhere
        self._follows: dict[bytes, set[bytes]] = {}  # line -> the lines right after it in a hunk
        for i, (key, marker) in enumerate(items):
            if marker:
                hunk = []
                continue
            hunk.append(marked[i][0])
            if i == 0 or items[i - 1][1]:
                self._starts.add(key)
            else:
                self._follows.setdefault(items[i - 1][0], set()).add(key)
            if i + 1 == len(items) or items[i + 1][1]:
                base = min(_depth(ln) for ln in hunk)
                wide = sum(_depth(ln) == base for ln in hunk)
                self._hunk_ends[key] = max(wide, self._hunk_ends.get(key, 0))
        self._keys = frozenset(self.lines) | self._shown
        self._barred: dict[OrderState, frozenset[bytes]] = {}
        self._skips: dict[tuple[int, int], frozenset[int]] = {}

    def step(self, state: OrderState, key: bytes) -> OrderState:
        """The state after the answer writes the (stripped, non-blank) line `key`."""
        if state.pos is None:
            return OrderState(None, key)
        new: set[Reading] = set()
        resumes = key in self._follows.get(state.last, ())  # the hunk goes on with `key`
        if resumes or key in self._starts:
            new.update((p, True) for p, _ in state.pos)
        at = self._at.get(key, ())
        lines = self.lines
        new.update((p + 1, False) for p, _ in state.pos if p + 1 < len(lines) and lines[p + 1] == key)
        if at and key in self._shown:
            lo = self._resume_from(state) if resumes else None
            if lo is not None:
                new.update((j, False) for j in at if j > lo + 1)
        elif at and state.last in self._hunk_ends:
            wide = self._hunk_ends[state.last]
            for p, _ in state.pos:
                new.update((j, False) for j in self._skips_from(p, wide) if lines[j] == key)
        return OrderState(frozenset(new) if new else None, key)

    def _resume_from(self, state: OrderState) -> int | None:
        """The first reading a skip onto a line the snippet shows may start from."""
        assert state.pos is not None
        starts = [p for p, wrote in state.pos
                  if wrote or (p >= 0 and self.lines[p] in self._shown)]
        return min(starts) if starts else None

    def _skips_from(self, p: int, wide: int) -> frozenset[int]:
        """The lines a skip after a hunk's last line may land on from original line p, for a
        hunk with `wide` lines at its own depth."""
        got = self._skips.get((p, wide))
        if got is None:
            out: list[int] = []
            low, count = 1 << 30, 0  # the skipped lines' least depth, and how many have it
            for j in range(p + 1, len(self.lines)) if p >= 0 else ():
                d = self._depth[j]
                if j > p + 1 and (d < low or (d == low and count <= wide)):
                    out.append(j)
                if d < low:
                    low, count = d, 1
                elif d == low:
                    count += 1
                if low == 0 and count > wide:
                    break  # no later line is shallower than the skipped ones
            got = self._skips[(p, wide)] = frozenset(out)
        return got

    def barred(self, state: OrderState) -> frozenset[bytes]:
        """The lines (stripped) the answer may not write next: no reading reaches them."""
        if state.pos is None:
            return frozenset()
        got = self._barred.get(state)
        if got is None:
            lines = self.lines
            ok = {lines[p + 1] for p, _ in state.pos if p + 1 < len(lines)}
            ok.update(self._starts)
            ok.update(self._follows.get(state.last, ()))  # (a skip onto a shown line is one)
            if state.last in self._hunk_ends:
                wide = self._hunk_ends[state.last]
                for p, _ in state.pos:
                    ok.update(lines[j] for j in self._skips_from(p, wide)
                              if lines[j] not in self._shown)
            if len(self._barred) > 4096:
                self._barred.clear()
            got = self._barred[state] = self._keys - ok
        return got

    def may_end(self, state: OrderState) -> bool:
        if state.pos is None:
            return True
        if any(p == len(self.lines) - 1 for p, _ in state.pos):
            return True
        return self._open_end and bool(self.shown) and state.last == self.shown[-1]


def _depth(line: bytes) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip(_WS))

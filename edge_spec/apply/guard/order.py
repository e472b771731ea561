"""The order a merged file keeps: the original's lines in their order, the snippet's in theirs.

A merged file is the original with each hunk of the snippet put in its place, so read against
the original it copies runs of lines, writes the snippet's hunks as runs, and skips original
lines only where the snippet says so. This module follows the answer's complete lines
(stripped; blank lines do not count) over the original's non-blank lines. A reading is the
original line the last copy was (-1: none yet) and what was written since: nothing, k snippet
lines that are the original's own next k lines, or snippet lines that differ (new code);
repeated lines keep several readings open. A line of the answer is

- the next original line after a reading's (a copy);
- a snippet line written as new code: the first line of a hunk (after a marker, or the
  snippet's first), or the line that follows the one just written in the snippet: a hunk is
  written as one run;
- an original line further on (a skip), which must be either the line that follows the one
  just written in the snippet, reached after snippet lines or from a line the snippet shows
  (the hunk's own context says where it resumes, or that the lines between two of its context
  lines are gone), or, right after the last line of a hunk (a line a marker or the snippet's
  end follows) and from a reading that wrote new code since its copy (a hunk that only repeats
  the original's lines replaces nothing), a line that closes what was skipped: the skipped
  lines are all indented deeper than it (the rest of the block the hunk ends in), or none is
  shallower than it and those at the skipped lines' own depth are no more than the hunk's
  lines at its depth (a hunk without context in the original replaces as many blocks as it
  has, as a method replaced by name); the skip does not pass the hunk's last line where the
  original has it at the same depth (a hunk that ends on a line of the original ends there).

A copy, or a line that goes on with a hunk, keeps at least the blank lines its text has before
it (the file's opening ones aside; between two lines a placement reads as context, the fewer
the snippet shows): a copied run keeps its spacing. The model may still write
more, so no way on is closed; fewer, the usual slip, is the one barred.

Where a sure placement of a hunk (`aligned`, from the structural merge; for a hunk it is unsure
of, the run at an end of the hunk that stands on a line both texts have once) reads an original
line as the hunk's context, a merged file goes on from that line with the hunk: the copy of it is
pinned to the snippet's next line, after the snippet's own blank lines there, and the line is
never new code (written again as the hunk while the original's copy is still ahead); a line
the snippet shows only as such context is never new code at all (from which the answer could
skip on, past the original's spacing, or write the hunk again further on), and the hunk goes
on after it only from the copy of the original line it stands for; a skip onto it lands
there, and a skip from it lands on the line the hunk's next line stands for. Where a
sure placement inserts a hunk's first lines after an original line (`follows`), that line's
copy is pinned to them in the same way.

The answer may end only once the last original line is copied, or, for a snippet that ends
without a marker (its end is the file's end), right after the snippet's last line. It does not
wait for snippet lines left out: their place is behind the answer, and one written at the end
is no better than none. Every expected file of the dev sets keeps these rules; a lazy answer
that jumps from the snippet to the end of the file does not. When no reading is left (a line
these rules do not allow got through), the order stops constraining; the guard that uses it
also lets go where it leaves no line at all to write (`edge_spec.apply.guard.lineset`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_WS = b" \t"
# (the last copied original line, and the snippet lines written since: 0 none, k > 0 that
# many, each the original's own next line, -1 some that are not)
Reading = tuple[int, int]


@dataclass(frozen=True)
class OrderState:
    """The readings of the answer so far (None: the order no longer constrains) and its last
    line (stripped)."""

    pos: frozenset[Reading] | None = frozenset({(-1, 0)})
    last: bytes = b""


class LineOrder:
    """The rules above for one original (its raw lines) and one snippet (its lines in order,
    each with whether it is a marker). `aligned` pairs an original line with the snippet line
    a sure placement of the hunk reads it as (0-based indices into the two line lists)."""

    def __init__(
        self,
        original: Iterable[bytes],
        snippet: Iterable[tuple[bytes, bool]],
        aligned: Iterable[tuple[int, int]] = (),
        follows: Iterable[tuple[int, bytes, int]] = (),
    ) -> None:
        original = list(original)
        raw, self._gap, onum = _runs((ln, False) for ln in original)
        # Blank lines the original ends with (its final newline is its last line's own).
        tail = len(original) - 1 - max(onum, default=-1)
        self.tail_blanks = max(0, tail - 1)
        if self._gap:
            # Blank lines that open the file are not asked for: a model that leaves them out
            # and is barred from its first line starts somewhere else entirely.
            self._gap[0] = 0
        self.lines = [ln.strip(_WS) for ln, _ in raw]
        self._depth = [_depth(ln) for ln, _ in raw]
        self._at: dict[bytes, list[int]] = {}
        for j, key in enumerate(self.lines):
            self._at.setdefault(key, []).append(j)
        marked, gaps, snum = _runs(snippet)
        items = [(ln.strip(_WS), marker) for ln, marker in marked]
        self.shown = [key for key, marker in items if not marker]
        self._shown = frozenset(self.shown)
        self._open_end = bool(items) and not items[-1][1]  # the snippet's end is the file's
        # A hunk's last line -> the most lines a hunk ending with it has at its own depth, and
        # the depth it has there.
        self._hunk_ends: dict[bytes, int] = {}
        self._end_depth: dict[bytes, int] = {}
        hunk: list[bytes] = []
        aligned = list(aligned)
        # Two context lines the snippet shows closer than the original has them (blank lines
        # deleted between): their copies may be as close.
        spot = {snum[s]: onum[o] for o, s in aligned if s in snum and o in onum}
        for i, p in spot.items():
            if spot.get(i - 1) == p - 1:
                self._gap[p] = min(self._gap[p], gaps[i])
        # Snippet lines a sure placement reads as context (at their own indentation: a line
        # moved into a new block is new code there).
        read = {
            snum[s]
            for o, s in aligned
            if s in snum
            and o in onum
            and raw[onum[o]][0].rstrip(_WS) == marked[snum[s]][0].rstrip(_WS)
        }
        # Lines that open a hunk somewhere, as new code: a sure hunk that opens with context
        # opens as the copy of it.
        self._starts: set[bytes] = set()
        # line -> the lines right after it in a hunk, each with the fewest blank lines between
        self._follows: dict[bytes, dict[bytes, int]] = {}
        for i, (key, marker) in enumerate(items):
            if marker:
                hunk = []
                continue
            hunk.append(marked[i][0])
            if i == 0 or items[i - 1][1]:
                if i not in read:
                    self._starts.add(key)
            else:
                nxt = self._follows.setdefault(items[i - 1][0], {})
                nxt[key] = min(gaps[i], nxt.get(key, gaps[i]))
            if i + 1 == len(items) or items[i + 1][1]:
                base = min(_depth(ln) for ln in hunk)
                wide = sum(_depth(ln) == base for ln in hunk)
                self._hunk_ends[key] = max(wide, self._hunk_ends.get(key, 0))
                self._end_depth.setdefault(key, _depth(marked[i][0]))
        self._pins = _pins(self.lines, items, gaps, onum, snum, aligned)
        # Where a sure placement puts a hunk's first lines before an original line (`follows`:
        # the original line before them, the line a merged file writes next, the blank lines
        # between), the copy of that line goes on with the hunk too: the answer cannot copy
        # on past an insertion the snippet shows.
        for o, then, space in follows:
            at = onum.get(o)
            if (
                at is not None
                and at not in self._pins
                and (at + 1 >= len(self.lines) or self.lines[at + 1] != then)
            ):
                self._pins[at] = (then, space)
        # Original lines a sure placement reads as context: never new code written again.
        self._context = frozenset(onum[o] for o, _ in aligned if o in onum)
        # A sure hunk's context line -> the original line its hunk's next line stands for
        # (none: the hunk goes on with new code, or ends): a skip from its copy lands there.
        ctx_of = {snum[s]: onum[o] for o, s in aligned if s in snum and snum[s] in read}
        self._next_of = {
            p: frozenset({ctx_of[i + 1]} if i + 1 in ctx_of else ()) for i, p in ctx_of.items()
        }
        # Snippet lines that are context wherever the snippet shows them: a merged file
        # writes them only as copies, never as new code (from which the answer could skip on,
        # past the original's spacing, or start the hunk again further on).
        self._only_context = frozenset(
            key for i, (key, _) in enumerate(items) if i in read
        ) - frozenset(key for i, (key, marker) in enumerate(items) if not marker and i not in read)
        # Lines the snippet shows only in hunks a sure placement reads (some line of the hunk
        # is context): such a hunk goes on only where it is placed.
        sure, hunk_of, n = set(), [], 0
        for i, (_, marker) in enumerate(items):
            n += marker
            hunk_of.append(n)
            if i in read:
                sure.add(n)
        self._sure = frozenset(
            key for i, (key, m) in enumerate(items) if hunk_of[i] in sure
        ) - frozenset(key for i, (key, m) in enumerate(items) if not m and hunk_of[i] not in sure)
        self.keys = frozenset(self.lines) | self._shown  # every line it may allow
        self._barred: dict[tuple[OrderState, int], frozenset[bytes]] = {}
        self._skips: dict[tuple[int, int], frozenset[int]] = {}
        self._flowing: dict[tuple[OrderState, int], frozenset[bytes]] = {}

    def step(self, state: OrderState, key: bytes, blanks: int = 0) -> OrderState:
        """The state after the answer writes the (stripped, non-blank) line `key` after
        `blanks` blank lines."""
        if state.pos is None:
            return OrderState(None, key)
        pins = self._pins
        pos = [(p, k) for p, k in state.pos if k or pins.get(p, (key, blanks)) == (key, blanks)]
        new: set[Reading] = set()
        gap = self._follows.get(state.last, {}).get(key)
        resumes = gap is not None and blanks >= gap  # the hunk goes on with `key`
        lines, gaps = self.lines, self._gap
        # A sure hunk goes on from the copy of its own context line, not another copy.
        going = (
            pos
            if state.last not in self._sure
            else [(p, k) for p, k in pos if k or p in self._context]
        )
        if (resumes or key in self._starts) and key not in self._only_context:
            for p, k in pos if key in self._starts else going:
                n = _wrote(lines, p, k, key)
                if n < 0 or p + n not in self._context:
                    new.add((p, n))
        at = self._at.get(key, ())
        new.update(
            (p + 1, 0)
            for p, _ in pos
            if p + 1 < len(lines) and lines[p + 1] == key and blanks >= gaps[p + 1]
        )
        if at and key in self._shown:
            fixed = [p for p, k in going if not k and p in self._next_of] if resumes else []
            for p in fixed:  # (from a sure hunk's context: where its next line stands)
                new.update((j, 0) for j in self._next_of[p] if j > p + 1 and lines[j] == key)
            lo = (
                self._resume_from(r for r in going if r[1] or r[0] not in self._next_of)
                if resumes
                else None
            )
            if lo is not None:  # (onto a sure hunk's context: the line it stands for)
                only = key in self._only_context
                new.update((j, 0) for j in at if j > lo + 1 and (not only or j in self._context))
        elif at and state.last in self._hunk_ends:
            wide = self._hunk_ends[state.last]
            for p, k in pos:
                if k < 0:
                    past = self._past(p, state.last)
                    new.update(
                        (j, 0) for j in self._skips_from(p, wide) if lines[j] == key and j <= past
                    )
        return OrderState(frozenset(new) if new else None, key)

    def _resume_from(self, pos: Iterable[Reading]) -> int | None:
        """The first reading a skip onto a line the snippet shows may start from."""
        starts = [p for p, k in pos if k or (p >= 0 and self.lines[p] in self._shown)]
        return min(starts) if starts else None

    def _past(self, p: int, last: bytes) -> int:
        """The farthest line a skip after the hunk's last line may land on from original line
        p: just past that line's next place in the original at its depth (a hunk that ends on
        a line of the original ends there)."""
        depth = self._end_depth.get(last)
        for j in self._at.get(last, ()):
            if j > p and self._depth[j] == depth:
                return j + 1
        return len(self.lines)

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

    def barred(self, state: OrderState, blanks: int = 0) -> frozenset[bytes]:
        """The lines (stripped) the answer may not write next, after `blanks` blank lines: no
        reading reaches them."""
        if state.pos is None:
            return frozenset()
        got = self._barred.get((state, blanks))
        if got is None:
            if len(self._barred) > 4096:
                self._barred.clear()
            got = self._barred[(state, blanks)] = self.keys - self._reached(state, blanks)
        return got

    def flowing(self, state: OrderState, blanks: int) -> frozenset[bytes]:
        """The lines the answer may write next, after `blanks` blank lines, other than a hunk
        begun anew: a copy, the hunk going on, a skip. (A hunk's first line may be written from
        any reading, so it says nothing about the blank lines the answer owes here.)"""
        if state.pos is None:
            return self.keys
        got = self._flowing.get((state, blanks))
        if got is None:
            if len(self._flowing) > 4096:
                self._flowing.clear()
            got = self._flowing[(state, blanks)] = frozenset(self._reached(state, blanks, False))
        return got

    def _reached(self, state: OrderState, blanks: int, starts: bool = True) -> set[bytes]:
        assert state.pos is not None
        pinned = [(p, k) for p, k in state.pos if not k and p in self._pins]
        free = [r for r in state.pos if r not in pinned]
        # A pinned reading goes on only with its pin (checked by stepping: a copy or a hunk).
        ok = {
            self._pins[p][0]
            for p, _ in pinned
            if self.step(OrderState(frozenset({(p, 0)}), state.last), self._pins[p][0], blanks).pos
            is not None
        }
        if not free:
            return ok
        lines = self.lines
        ok.update(
            lines[p + 1] for p, _ in free if p + 1 < len(lines) and blanks >= self._gap[p + 1]
        )
        # New code (a skip onto a shown line is one too), unless a sure placement reads it
        # as context: then only a copy or a skip writes it, so step to see.
        hunk = set(self._starts) if starts else set()
        hunk.update(k for k, gap in self._follows.get(state.last, {}).items() if blanks >= gap)
        free_state = OrderState(frozenset(free), state.last)
        ok.update(
            k
            for k in hunk
            if k in ok or not self._context or self.step(free_state, k, blanks).pos is not None
        )
        if state.last in self._hunk_ends:
            wide = self._hunk_ends[state.last]
            for p, k in free:
                if k < 0:
                    past = self._past(p, state.last)
                    ok.update(
                        lines[j]
                        for j in self._skips_from(p, wide)
                        if lines[j] not in self._shown and j <= past
                    )
        return ok

    def blank_room(self, state: OrderState, blanks: int) -> int:
        """How many more blank lines the answer may write after `blanks` of them: any number
        (a large one), unless every reading is a pinned one, whose hunk goes on after the
        snippet's own blank lines there."""
        if state.pos is None or any(k or p not in self._pins for p, k in state.pos):
            return 1 << 30
        return max(self._pins[p][1] - blanks for p, _ in state.pos)

    def may_end(self, state: OrderState) -> bool:
        if state.pos is None:
            return True
        last = len(self.lines) - 1
        if any(p == last and (k or p not in self._pins) for p, k in state.pos):
            return True
        return self._open_end and bool(self.shown) and state.last == self.shown[-1]


def _pins(
    lines: list[bytes],
    items: list[tuple[bytes, bool]],
    gaps: list[int],
    onum: Mapping[int, int],
    snum: Mapping[int, int],
    aligned: Iterable[tuple[int, int]],
) -> dict[int, tuple[bytes, int]]:
    """Original line (non-blank index) -> the line that must follow its copy, and after how
    many blank lines: where a sure placement reads it as a hunk's context line and the hunk
    goes on with a line other than the original's next, a merged file writes that line next,
    spaced as the snippet has it."""
    out: dict[int, tuple[bytes, int]] = {}
    for o, s in aligned:
        p, i = onum.get(o), snum.get(s)
        if p is None or i is None or i + 1 >= len(items) or items[i + 1][1]:
            continue
        nxt = items[i + 1][0]
        if items[i][0] == lines[p] and (p + 1 >= len(lines) or lines[p + 1] != nxt):
            out.setdefault(p, (nxt, gaps[i + 1]))
    return out


def _wrote(lines: list[bytes], p: int, k: int, key: bytes) -> int:
    """A reading's count after the snippet line `key` is written as new code."""
    if k >= 0 and p + k + 1 < len(lines) and lines[p + k + 1] == key:
        return k + 1  # still the original's own lines
    return -1


def _runs(
    lines: Iterable[tuple[bytes, bool]],
) -> tuple[list[tuple[bytes, bool]], list[int], dict[int, int]]:
    """The non-blank lines, how many blank lines come right before each, and each one's
    index among them by its index among all lines."""
    out: list[tuple[bytes, bool]] = []
    gaps: list[int] = []
    num: dict[int, int] = {}
    run = 0
    for n, (ln, marker) in enumerate(lines):
        if ln.strip(_WS):
            num[n] = len(out)
            out.append((ln, marker))
            gaps.append(run)
            run = 0
        else:
            run += 1
    return out, gaps, num


def _depth(line: bytes) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip(_WS))

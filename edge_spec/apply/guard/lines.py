"""Guards over lines: a guard whose state is the current line, and one that bans forbidden
line starts.

What is forbidden is a regex over the start of a line (apply uses it for `... existing code ...`
markers the original does not have). The banned set depends only on the current line's text,
and that only while the line could still become a forbidden start, so sets are computed once
per such prefix and cached.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

_NONE = np.zeros(0, dtype=np.int64)


class LineContext:
    """For guards whose state is `line_context` of the output."""

    def start(self, tail: bytes) -> bytes:
        return line_context(tail)

    def advance(self, state: bytes, piece: bytes) -> bytes:
        return line_context(state + piece)


class LineGuard(LineContext):
    """Bans tokens that would make a line match `forbidden` (a regex anchored at line start).

    `risky` matches the stripped text of a line that is still a prefix of a forbidden start
    (e.g. `#`, `// ..`); any other line can only turn forbidden through a newline inside a
    token, which one shared set covers.
    """

    def __init__(
        self,
        token_text: Callable[[int], str],
        n_vocab: int,
        forbidden: re.Pattern[str],
        risky: re.Pattern[str],
        alphabet: frozenset[str] | None = None,
    ) -> None:
        self._text = token_text
        # The characters (besides whitespace) a forbidden start can contain, when known: tokens
        # opening with any other character are not checked against a new line prefix.
        self._alphabet = alphabet
        self._n = n_vocab
        self._forbidden = forbidden
        self._risky = risky
        self._cache: dict[str, np.ndarray] = {}
        self._texts: list[str] | None = None
        # Token ids by their text's first character, then by the first two: a new line prefix
        # checks only the tokens whose opening characters keep the line a possible bad start.
        self._by_start: list[tuple[str, list[int], list[tuple[str, list[int]]]]] | None = None

    def _all_texts(self) -> list[str]:
        if self._texts is None:
            self._texts = [self._text(t) for t in range(self._n)]
        return self._texts

    def _starts(self) -> list[tuple[str, list[int], list[tuple[str, list[int]]]]]:
        """Token ids grouped by first character (all of them, and by the first two, keeping
        only pairs whose second character a forbidden start can contain), for the first
        characters a forbidden start can contain."""
        if self._by_start is None:
            groups: dict[str, dict[str, list[int]]] = {}
            for tid, text in enumerate(self._all_texts()):
                groups.setdefault(text[:1], {}).setdefault(text[:2], []).append(tid)
            self._by_start = [
                (
                    c,
                    [t for ids in sub.values() for t in ids],
                    [(two, ids) for two, ids in sub.items() if len(two) < 2 or self._may(two[1])],
                )
                for c, sub in groups.items()
                if self._may(c)
            ]
        return self._by_start

    def _may(self, char: str) -> bool:
        return self._alphabet is None or char in self._alphabet or char.isspace()

    def _open(self, text: str) -> bool:
        """Whether a line starting with `text` can still be (or already is) a bad start."""
        return bool(self._risky.fullmatch(text.lstrip()) or self._forbidden.match(text))

    def banned(self, line: bytes | str) -> np.ndarray:
        """Token ids that must not follow `line` (the current line's text so far)."""
        if isinstance(line, bytes):
            line = last_line(line).decode("utf-8", "ignore")
        key = line.lstrip()
        if not self._risky.fullmatch(key):
            key = "\n"  # any safe line: only a newline inside the token can start a bad line
        if key == "\n":
            return self._shared()
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = self._scan(key)
        return got

    def _shared(self) -> np.ndarray:
        """Tokens that start a bad line after a newline of their own, whatever precedes them."""
        got = self._cache.get("\n")
        if got is None:
            got = self._cache["\n"] = self._scan("\n")
        return got

    def _scan(self, key: str) -> np.ndarray:
        bad = self._forbidden.match
        texts = self._all_texts()
        if key == "\n":
            out = [
                tid
                for tid, text in enumerate(texts)
                if "\n" in text and any(bad(seg) for seg in text.split("\n")[1:])
            ]
            return np.asarray(out, dtype=np.int64) if out else _NONE
        if bad(key):  # only reachable when the line already is a bad start
            ids = list(range(self._n))
        else:
            # A token turns the line bad through its first segment only if the line is bad
            # after its first character, or stays open (a prefix of a bad start) through its
            # first two; bad later segments do not depend on the line: the shared set.
            ids = []
            for c, group, pairs in self._starts():
                if bad(key + c):  # bad already: the rest of the token cannot save it
                    ids.extend(group)
                elif self._risky.fullmatch((key + c).lstrip()):
                    ids.extend(t for two, g in pairs if self._open(key + two) for t in g)
        out = sorted(
            {tid for tid in ids if bad(key + texts[tid].split("\n", 1)[0])}
            | set(self._shared().tolist())
        )
        return np.asarray(out, dtype=np.int64) if out else _NONE


def last_line(text: bytes) -> bytes:
    """The bytes after the last newline."""
    cut = text.rfind(b"\n")
    return text if cut < 0 else text[cut + 1 :]


def line_context(text: bytes) -> bytes:
    """What a guard sees of the text so far: the current line, after the last non-blank
    complete line and any blank lines since (all of `text` when it has no such line)."""
    end = text.rfind(b"\n")
    while end >= 0:
        start = text.rfind(b"\n", 0, end) + 1
        if text[start:end].strip(b" \t"):
            return text[start:]
        if start == 0:
            break
        end = start - 1
    return text

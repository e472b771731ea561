"""A decode-time guard: tokens that would start a forbidden line are banned, row by row.

The guard is part of the target: the loop masks the banned tokens in every logits row before
the argmax (or the softmax) is taken, in plain and speculative decoding alike, so greedy
speculative output still equals plain output of the guarded target. What is forbidden is a
regex over the start of a line (apply uses it for `... existing code ...` markers the original
does not have). The banned set depends only on the current line's text, and that only while the
line could still become a forbidden start, so sets are computed once per such prefix and cached.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

_NONE = np.zeros(0, dtype=np.int64)


class LineGuard:
    """Bans tokens that would make a line match `forbidden` (a regex anchored at line start).

    `risky` matches the stripped text of a line that is still a prefix of a forbidden start
    (e.g. `#`, `// ..`); any other line can only turn forbidden through a newline inside a
    token, which one shared set covers.
    """

    def __init__(self, token_text: Callable[[int], str], n_vocab: int, forbidden: re.Pattern[str],
                 risky: re.Pattern[str]) -> None:
        self._text = token_text
        self._n = n_vocab
        self._forbidden = forbidden
        self._risky = risky
        self._cache: dict[str, np.ndarray] = {}
        self._texts: list[str] | None = None

    def _all_texts(self) -> list[str]:
        if self._texts is None:
            self._texts = [self._text(t) for t in range(self._n)]
        return self._texts

    def banned(self, line: str) -> np.ndarray:
        """Token ids that must not follow `line` (the current line's text so far)."""
        key = line.lstrip()
        if not self._risky.fullmatch(key):
            key = "\n"  # any safe line: only a newline inside the token can start a bad line
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = self._scan(key)
        return got

    def _scan(self, key: str) -> np.ndarray:
        bad = self._forbidden.match
        out = []
        for tid, text in enumerate(self._all_texts()):
            if key == "\n":
                if "\n" not in text:
                    continue
                segs = text.split("\n")[1:]
            else:
                segs = (key + text).split("\n")
            if any(bad(seg) for seg in segs):
                out.append(tid)
        return np.asarray(out, dtype=np.int64) if out else _NONE

    def mask(self, logits: np.ndarray, lines: Sequence[str]) -> None:
        """Set the banned tokens of row i to -inf, given the line text before row i."""
        for i, line in enumerate(lines):
            ids = self.banned(line)
            if ids.size:
                logits[i, ids] = -np.inf


def last_line(text: str) -> str:
    """The text after the last newline."""
    cut = text.rfind("\n")
    return text if cut < 0 else text[cut + 1:]

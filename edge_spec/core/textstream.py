"""Incremental detokenization: UTF-8-safe deltas and stop strings that may span tokens."""

from __future__ import annotations

import codecs
from collections.abc import Callable, Sequence


class TextStream:
    """Turns token bytes into text deltas, never splitting a character or leaking a stop string.

    >>> ts = TextStream(lambda t: bytes([t]), stop=["\\n\\n"])
    >>> ts.push(0x61), ts.push(0x0A), ts.push(0x0A)
    (('a', False), ('', False), ('', True))
    """

    def __init__(self, token_bytes: Callable[[int], bytes], stop: Sequence[str] = ()) -> None:
        self._bytes = token_bytes
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stop = [s for s in stop if s]
        self._hold = max((len(s) for s in self._stop), default=1) - 1
        self.text = ""
        self.emitted = 0
        self.stopped = False

    def push(self, token: int) -> tuple[str, bool]:
        """Add one token; return (text safe to emit now, whether a stop string was hit)."""
        self.text += self._dec.decode(self._bytes(token))
        if self._stop:
            if self._cut_at_stop():
                return self._take(len(self.text)), True
            return self._take(self._safe_end()), False
        return self._take(len(self.text)), False

    def _cut_at_stop(self) -> bool:
        """Cut the text where the earliest stop string starts, if one has appeared."""
        start = max(0, self.emitted - self._hold)
        hits = [i for i in (self.text.find(s, start) for s in self._stop) if i >= 0]
        if hits:
            self.text = self.text[: min(hits)]
            self.stopped = True
        return bool(hits)

    def _safe_end(self) -> int:
        # Hold back a tail that could still grow into a stop string.
        end = len(self.text)
        for s in self._stop:
            for n in range(min(len(s) - 1, len(self.text)), 0, -1):
                if self.text.endswith(s[:n]):
                    end = min(end, len(self.text) - n)
                    break
        return max(end, self.emitted)

    def _take(self, end: int) -> str:
        delta = self.text[self.emitted:end]
        self.emitted = max(self.emitted, end)
        return delta

    def flush(self) -> str:
        """End of generation: emit whatever is held back (an incomplete character becomes U+FFFD)."""
        if not self.stopped:
            self.text += self._dec.decode(b"", final=True)
            if self._stop:  # that U+FFFD can complete a stop string (e.g. "\ufffd"): cut it too
                self._cut_at_stop()
        return self._take(len(self.text))

"""Incremental detokenization: UTF-8-safe deltas and stop strings that may span tokens."""

from __future__ import annotations

import codecs
from collections.abc import Callable, Sequence


class TextStream:
    """Turns token bytes into text deltas, never splitting a character or leaking a stop string.

    Linear in the output: emitted text is kept as a list of deltas and only the held-back tail
    (at most the longest stop string) is ever searched or copied.

    >>> ts = TextStream(lambda t: bytes([t]), stop=["\\n\\n"])
    >>> ts.push(0x61), ts.push(0x0A), ts.push(0x0A)
    (('a', False), ('', False), ('', True))
    """

    def __init__(self, token_bytes: Callable[[int], bytes], stop: Sequence[str] = ()) -> None:
        self._bytes = token_bytes
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stop = [s for s in stop if s]
        self._out: list[str] = []  # emitted deltas
        self._pending = ""  # decoded, not emitted yet: empty or a proper prefix of a stop
        self.emitted = 0  # characters emitted so far
        self.stopped = False
        self._joined: str | None = None

    @property
    def text(self) -> str:
        """All text so far (emitted plus held back); after a stop, cut where the stop began."""
        if self._joined is None or len(self._joined) != self.emitted:
            self._joined = "".join(self._out)
            self._out = [self._joined] if self._joined else []
        return self._joined + self._pending

    def push(self, token: int) -> tuple[str, bool]:
        """Add one token; return (text safe to emit now, whether a stop string was hit)."""
        self._pending += self._dec.decode(self._bytes(token))
        if not self._stop:
            return self._take(len(self._pending)), False
        if self._cut_at_stop():
            return self._take(len(self._pending)), True
        return self._take(self._safe_end()), False

    def _cut_at_stop(self) -> bool:
        """Cut the held text where the earliest stop string starts, if one has appeared.

        A stop can only start inside the held-back part: emitted text never ends with a
        proper prefix of a stop string.
        """
        hits = [i for i in (self._pending.find(s) for s in self._stop) if i >= 0]
        if hits:
            self._pending = self._pending[: min(hits)]
            self.stopped = True
        return bool(hits)

    def _safe_end(self) -> int:
        # Hold back a tail that could still grow into a stop string.
        text = self._pending
        end = len(text)
        for s in self._stop:
            for n in range(min(len(s) - 1, len(text)), 0, -1):
                if text.endswith(s[:n]):
                    end = min(end, len(text) - n)
                    break
        return end

    def _take(self, end: int) -> str:
        delta, self._pending = self._pending[:end], self._pending[end:]
        if delta:
            self._out.append(delta)
            self.emitted += len(delta)
        return delta

    def flush(self) -> str:
        """End of generation: emit whatever is held back (an incomplete character becomes U+FFFD)."""
        if not self.stopped:
            self._pending += self._dec.decode(b"", final=True)
            if self._stop:  # that U+FFFD can complete a stop string (e.g. "\ufffd"): cut it too
                self._cut_at_stop()
        return self._take(len(self._pending))

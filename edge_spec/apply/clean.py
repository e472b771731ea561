"""Output cleaning (wrappers, final newline, CRLF) and lazy-answer detection."""

from __future__ import annotations

import re
from collections.abc import Sequence

from edge_spec.apply.merge.markers import marker_shape
from edge_spec.apply.merge.naive import MARKER


def clean_output(
    raw: str, original: str, prefix: str = "", stop: tuple[str, ...] = (), stopped: bool = True
) -> str:
    """Strip a wrapping fence or output tags; keep the original's final-newline convention.

    The body is never altered: only the wrapper goes, and a final newline is added or removed
    to match the original file.
    """
    text = raw
    if stopped and any(s.startswith("\n") for s in stop):
        text += "\n"  # the stop string ("\n```") took the body's last newline with it
    if not prefix:  # the model wrote its own wrapper
        m = re.match(r"^\s*(`{3,})[^\n]*\n", text)
        if m:
            text = text[m.end() :]
            close = text.rfind("\n" + m.group(1))
            if close >= 0:
                text = text[: close + 1]
        for open_tag, close_tag in (
            ("<updated-code>", "</updated-code>"),
            ("<update_file>", "</update_file>"),
        ):
            if text.lstrip().startswith(open_tag):
                text = text.lstrip()[len(open_tag) :].split(close_tag)[0]
    if prefix.startswith("<") and text.startswith("\n") and not original.startswith("\n"):
        text = text[1:]
    if original.endswith("\n") and not text.endswith("\n"):
        text += "\n"
    elif original and not original.endswith("\n") and text.endswith("\n"):
        text = text[:-1]
    if "\r\n" in original:
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    return text


def lazy_lines(text: str, original: str, markers: Sequence[str] = ()) -> list[int]:
    """1-based lines of `text` that are elision markers (`... existing code ...`, or a comment
    only in the elision vocabulary such as `// Existing code`: `markers.marker_shape`), or the
    snippet's own `markers` (stripped lines in any wording), that `original` does not have.

    >>> lazy_lines("a\\n# ... existing code ...\\nb\\n", "a\\nx\\nb\\n")
    [2]
    >>> lazy_lines("a\\n/* unchanged */\\n", "a\\nx\\n", ["/* unchanged */"])
    [2]
    >>> lazy_lines("a\\n// Existing code\\n", "a\\nx\\n")
    [2]
    """
    have = {ln.strip() for ln in original.splitlines()}
    copied = set(markers) - have
    return [
        i
        for i, ln in enumerate(text.splitlines(), 1)
        if (MARKER.match(ln) or ln.strip() in copied or marker_shape(ln)) and ln.strip() not in have
    ]

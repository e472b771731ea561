"""Apply accuracy metrics: exact, whitespace-insensitive and line-level similarity."""

from __future__ import annotations

from difflib import SequenceMatcher


def ws_equal(a: str, b: str) -> bool:
    """Equal after dropping all whitespace (indentation, blank lines, trailing spaces).

    >>> ws_equal("def f():\\n  return 1\\n", "def f():\\n    return 1")
    True
    """
    return "".join(a.split()) == "".join(b.split())


def line_similarity(a: str, b: str) -> float:
    """difflib ratio over lines (1.0 = identical files), ignoring trailing whitespace."""
    la = [ln.rstrip() for ln in a.splitlines()]
    lb = [ln.rstrip() for ln in b.splitlines()]
    if not la and not lb:
        return 1.0
    return SequenceMatcher(None, la, lb, autojunk=False).ratio()

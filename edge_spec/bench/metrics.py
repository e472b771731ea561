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


def token_equal(a: str, b: str, language: str = "", filename: str = "") -> bool | None:
    """Equal as Pygments token streams, whitespace tokens dropped (the metric aiXapply reports).

    None when Pygments (extra `bench`) is missing or knows no lexer for the language.

    >>> token_equal("x = [1,2]\\n", "x = [1, 2]\\n", "python")
    True
    """
    try:  # optional extra: the other metrics do not need it
        from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
        from pygments.token import Text
        from pygments.util import ClassNotFound
    except ImportError:
        return None
    try:
        lexer = get_lexer_by_name(language) if language else get_lexer_for_filename(filename)
    except ClassNotFound:
        return None

    def stream(text: str) -> list[tuple[object, str]]:
        return [
            (t, v) for t, v in lexer.get_tokens(text) if not (v.isspace() or t in Text.Whitespace)
        ]

    return stream(a) == stream(b)


MISS_CLASSES = ("lazy", "unplaced", "outside_edit", "incomplete", "invalid", "other")


def miss_class(rec: dict[str, object]) -> str | None:
    """Why an apply answer is not the expected file (None when it is, or nothing to judge)."""
    if rec.get("match_expected") is not False:
        return None
    suspect = " ".join(str(s) for s in rec.get("suspect") or [])
    verdicts = rec.get("verdicts") or []
    if rec.get("lazy"):
        return "lazy"
    if rec.get("finish_reason") == "length":
        return "incomplete"
    if "does not parse" in suspect:
        return "invalid"
    if "outside the edited regions" in suspect:
        return "outside_edit"
    if any(isinstance(v, dict) and v.get("status") == "unplaced" for v in verdicts):
        return "unplaced"
    return "other"

"""Apply accuracy metrics: exact, whitespace-insensitive and line-level similarity."""

from __future__ import annotations

from collections.abc import Sequence
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


def line_split(
    pieces: Sequence[bytes], emitted: Sequence[int], original: str
) -> dict[str, float | int]:
    """Tokens and forwards an apply answer spent on changed lines apart from copied ones.

    `pieces` are the output tokens' bytes, `emitted[i]` how many tokens forward i produced. A
    token belongs to the line it starts on; a line is changed when no original line reads
    the same (ignoring surrounding whitespace; blank lines count as copied). A forward's cost is
    shared between the two in proportion to the tokens it produced on each, so
    `changed_tokens / changed_forwards` is the tokens per forward on the changed lines.
    """
    text = b"".join(pieces).decode("utf-8", "replace")
    seen = {ln.strip() for ln in original.splitlines()}
    changed_line = [bool(ln.strip()) and ln.strip() not in seen for ln in text.split("\n")]
    flags, line = [], 0
    for piece in pieces:
        flags.append(changed_line[min(line, len(changed_line) - 1)])
        line += piece.count(b"\n")
    out: dict[str, float | int] = {"changed_tokens": sum(flags), "copied_tokens": 0}
    out["copied_tokens"] = len(flags) - out["changed_tokens"]
    fwd_changed = fwd_copied = 0.0
    i = 0
    for n in emitted:
        part = flags[i : i + n]
        i += n
        if part:
            share = sum(part) / len(part)
            fwd_changed += share
            fwd_copied += 1 - share
    out["changed_forwards"] = round(fwd_changed, 3)
    out["copied_forwards"] = round(fwd_copied, 3)
    return out

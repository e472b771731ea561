"""The apply guard: the model may not start an elision marker line the original does not have.

A lazy answer copies the snippet's `... existing code ...` markers instead of the code they
stand for; writing that file would delete code. The guard (a `LineGuard`, part of the target)
bans the token that would make a line an ellipsis marker: a comment leader followed by `...` or
`…` (`# ...`, `// ... existing code`), or a bare ellipsis followed by an elision word
(`... existing code ...`). JavaScript spreads (`...args`), Python's `...` statement and doctest
continuation lines (`... x = 1`) stay allowed. A marker form the original itself uses (a
comment leader it writes `...` after, bare `... word` lines) is not banned.

Snippets reword markers (`/* unchanged */`, `# rest of the file stays the same`); such a
marker without an ellipsis has the shape of an ordinary comment, so only the snippet's own
marker lines are banned (`markers`, whatever their wording): a line may not start with one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from edge_spec.core.guard import LineGuard

_LEADERS = ("#", "//", "/*", "<!--", "--", ";", "%", "{/*")
_ELLIPSIS = r"(?:\.\.\.|…)"
# Words that, right after a bare ellipsis, make the line an elision marker.
_WORDS = ("existing", "rest", "remaining", "unchanged", "previous", "other", "omitted", "same",
          "keep", "more", "original")


def _alt(items: tuple[str, ...] | list[str]) -> str:
    return "(?:" + "|".join(re.escape(i) for i in sorted(items, key=len, reverse=True)) + ")"


def _prefixes(words: tuple[str, ...]) -> list[str]:
    return sorted({w[:n] for w in words for n in range(1, len(w) + 1)})


# Guards keyed by (vocabulary, patterns): the banned sets they cache serve every request that
# allows the same marker forms.
_GUARDS: dict[tuple[str, int, str, str], LineGuard] = {}
_MAX_GUARDS = 8


def apply_guard(original: str, token_text: Callable[[int], str], n_vocab: int,
                vocab_key: str = "", markers: Sequence[str] = ()) -> LineGuard:
    """The guard for one apply request: marker forms the original has are allowed; `markers`
    (the snippet's marker lines, stripped) are banned unless the original has them."""
    lines = [ln.strip() for ln in original.splitlines()]
    own = sorted(set(m for m in markers if m) - set(lines))
    leaders = [ld for ld in _LEADERS
               if not any(re.match(re.escape(ld) + r"\s*" + _ELLIPSIS, ln) for ln in lines)]
    bare = not any(re.match(_ELLIPSIS + r"\s+" + _alt(_WORDS), ln) for ln in lines)
    forms = []
    if leaders:
        forms.append(_alt(leaders) + r"\s*" + _ELLIPSIS)
    if bare:
        forms.append(_ELLIPSIS + r"\s+" + _alt(_WORDS) + r"\b")
    if own:
        forms.append(_alt(own))
    if not forms:
        forms.append(r"(?!)")  # nothing to forbid
    forbidden = re.compile(r"\s*(?:" + "|".join(forms) + ")")
    partial = sorted({ld[:n] for ld in leaders for n in range(1, len(ld) + 1)})
    risky_parts = []
    if partial:
        risky_parts.append(_alt(partial) + r"\s*(?:\.{0,3}|…)?")
    risky_parts.append(r"(?:\.{0,3}|…)")
    if bare:
        risky_parts.append(_ELLIPSIS + r"\s*" + _alt(_prefixes(_WORDS)) + "?")
    if own:
        risky_parts.append(_alt(_prefixes(tuple(own))))
    risky = re.compile("(?:" + "|".join(risky_parts) + r")\s*")
    key = (vocab_key, n_vocab, forbidden.pattern, risky.pattern)
    guard = _GUARDS.get(key) if vocab_key else None
    if guard is None:
        guard = LineGuard(token_text, n_vocab, forbidden, risky)
        if vocab_key:
            if len(_GUARDS) >= _MAX_GUARDS:
                _GUARDS.pop(next(iter(_GUARDS)))
            _GUARDS[key] = guard
    return guard

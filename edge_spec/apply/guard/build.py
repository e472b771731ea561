"""The apply guard: the model may not start an elision marker line the original does not have.

A lazy answer copies the snippet's `... existing code ...` markers instead of the code they
stand for; writing that file would delete code. The guard (a `LineGuard`, part of the target)
bans the token that would make a line an ellipsis marker: a comment leader followed by `...` or
`…` (`# ...`, `// ... existing code`), or a bare ellipsis followed by an elision word
(`... existing code ...`). JavaScript spreads (`...args`), Python's `...` statement and doctest
continuation lines (`... x = 1`) stay allowed. A marker form the original itself uses (a
comment leader it writes `...` after, bare `... word` lines) is not banned.

Snippets reword markers (`/* unchanged */`, `# rest of the file stays the same`), and so does
the model when the ellipsis forms are banned (`# existing code ...`, `#_existing code ...`,
"// `existing code`"). Without an ellipsis a marker has the shape of an ordinary comment, so two
narrow rules cover it: a comment may not open with a word that says code was left out
(`existing`, `rest`, `remaining`, `unchanged`, ...; or `previous`/`original`/`other`/`more`
followed by what was left out: `other methods`), in any letter case, unless the original has a
comment that opens so (real comments rarely do); and the snippet's own marker lines (`markers`,
whatever their wording) are banned at the start of a line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from edge_spec.apply.guard.lines import LineGuard
from edge_spec.apply.guard.lineset import LineSet, VocabIndex
from edge_spec.apply.guard.order import LineOrder

_LEADERS = ("#", "//", "/*", "<!--", "--", ";", "%", "{/*")
_ELLIPSIS = r"(?:\.\.\.|…)"
# Words that, right after a bare ellipsis, make the line an elision marker.
_WORDS = (
    "existing",
    "rest",
    "remaining",
    "unchanged",
    "previous",
    "other",
    "omitted",
    "same",
    "keep",
    "more",
    "original",
)


# A comment whose first word is one of `_RUNS`, or one of `_STEMS` (then a non-letter:
# `rest_of` counts, `restore` does not), or one of `_ELIDED` and then one of `_WHAT`, is a
# worded marker.
_STEMS = ("rest", "remainder", "snip", "snipped", "the rest")
# Words no English word extends, so they count even run into the next one (`#_existingcode`).
_RUNS = ("existing", "remaining", "unchanged", "unmodified", "omitted", "elided", "truncated")
_ELIDED = ("previous", "original", "other", "more")
_WHAT = (
    "code",
    "implementation",
    "implementations",
    "content",
    "contents",
    "methods",
    "functions",
    "logic",
    "lines",
    "definitions",
    "imports",
    "tests",
    "file",
    "class",
    "classes",
    "body",
    "fields",
    "properties",
    "routes",
    "handlers",
    "helpers",
    "exports",
    "declarations",
    "statements",
    "types",
    "config",
    "configuration",
    "setup",
    "module",
    "components",
)


def _alt(items: tuple[str, ...] | list[str]) -> str:
    return "(?:" + "|".join(re.escape(i) for i in sorted(items, key=len, reverse=True)) + ")"


def _prefixes(words: tuple[str, ...]) -> list[str]:
    return sorted({w[:n] for w in words for n in range(1, len(w) + 1)})


def _spaced(pattern: str) -> str:
    return pattern.replace(r"\ ", r"\s+")


# Small alternations, not one of every phrase: `re` tries alternatives one by one, and the
# guard matches every vocabulary token against these when it meets a new line prefix.
# Between the leader and the first word: spaces or the dressing the model puts there when the
# plain form is banned (`#_existing code`, "// `existing code`", `#  # existing code`).
_DRESS = r"[\s_`'\"*:\-#/]*"
# A stem counts once a separator follows it (`# rest of`), not at the end of a token that the
# next one may extend (`# rest` + `ore`). The separators are listed, not "any non-letter", so
# that a banned start holds only characters of the guard's alphabet.
_AFTER = r"(?=[\s_.,:;!?\-…`'\"*/()\[\]{}])"
_FIRST = (
    _alt(_RUNS)
    + "|"
    + _spaced(_alt(_STEMS))
    + _AFTER
    + "|"
    + _alt(_ELIDED)
    + r"\s+"
    + _alt(_WHAT)
    + r"\b"
)
_WORDED = re.compile(r"\s*" + _alt(_LEADERS) + _DRESS + "(?i:" + _FIRST + ")")
_FIRST_START = (
    _spaced(_alt(_prefixes(_STEMS + _RUNS)))
    + "|"
    + _alt(_prefixes(_ELIDED))
    + "|"
    + _alt(_ELIDED)
    + r"\s+"
    + _alt(_prefixes(_WHAT))
)
_WORDED_START = _alt(_prefixes(_LEADERS)) + "(?:" + _DRESS + "(?i:" + _FIRST_START + ")?)?"


# Guards keyed by (vocabulary, patterns): the banned sets they cache serve every request that
# allows the same marker forms.
_GUARDS: dict[tuple[str, int, str, str], LineGuard] = {}
_MAX_GUARDS = 8


def apply_guard(
    original: str,
    token_text: Callable[[int], str],
    n_vocab: int,
    vocab_key: str = "",
    markers: Sequence[str] = (),
) -> LineGuard:
    """The guard for one apply request: marker forms the original has are allowed; `markers`
    (the snippet's marker lines, stripped) are banned unless the original has them."""
    lines = [ln.strip() for ln in original.splitlines()]
    own = sorted(set(m for m in markers if m) - set(lines))
    leaders = [
        ld
        for ld in _LEADERS
        if not any(re.match(re.escape(ld) + _DRESS + _ELLIPSIS, ln) for ln in lines)
    ]
    bare = not any(re.match(_ELLIPSIS + r"\s+" + _alt(_WORDS), ln) for ln in lines)
    worded = not any(_WORDED.match(ln) for ln in lines)
    forms = []
    if leaders:
        forms.append(_alt(leaders) + _DRESS + _ELLIPSIS)
    if bare:
        forms.append(_ELLIPSIS + r"\s+" + _alt(_WORDS) + r"\b")
    if own:
        forms.append(_alt(own))
    if worded:
        forms.append(_WORDED.pattern)
    if not forms:
        forms.append(r"(?!)")  # nothing to forbid
    forbidden = re.compile(r"\s*(?:" + "|".join(forms) + ")")
    partial = sorted({ld[:n] for ld in leaders for n in range(1, len(ld) + 1)})
    risky_parts = []
    if partial:
        risky_parts.append(_alt(partial) + _DRESS + r"(?:\.{0,3}|…)?")
    risky_parts.append(r"(?:\.{0,3}|…)")
    if bare:
        risky_parts.append(_ELLIPSIS + r"\s*" + _alt(_prefixes(_WORDS)) + "?")
    if own:
        risky_parts.append(_alt(_prefixes(tuple(own))))
    if worded:
        risky_parts.append(_WORDED_START)
    risky = re.compile("(?:" + "|".join(risky_parts) + r")\s*")
    key = (vocab_key, n_vocab, forbidden.pattern, risky.pattern)
    guard = _GUARDS.get(key) if vocab_key else None
    if guard is None:
        words = "".join(_WORDS + _STEMS + _RUNS + _ELIDED + _WHAT)
        alphabet = frozenset(
            "".join(_LEADERS) + ".…_`'\"*:-#/,;!?()[]{}" + words + words.upper() + "".join(own)
        )
        guard = LineGuard(token_text, n_vocab, forbidden, risky, alphabet)
        if vocab_key:
            if len(_GUARDS) >= _MAX_GUARDS:
                _GUARDS.pop(next(iter(_GUARDS)))
            _GUARDS[key] = guard
    return guard


_INDEXES: dict[tuple[str, int], VocabIndex] = {}


def lines_guard(
    original: str,
    snippet: Sequence[tuple[str, bool]],
    stop: Sequence[str],
    token_bytes: Callable[[int], bytes],
    n_vocab: int,
    vocab_key: str = "",
    order: bool = True,
    aligned: Iterable[tuple[int, int]] = (),
    follows: Iterable[tuple[int, bytes, int]] = (),
) -> LineSet:
    """The guard that keeps the answer to lines of the original and of the snippet (`snippet`:
    its lines, each with whether it is a marker; markers are never allowed), and lets it end
    (the closing fence of `stop`, or the end of text) only after the last line of either: a
    merged file ends the way one of them does. With `order`, the lines must also keep the
    texts' order (`edge_spec.apply.guard.order`), where `aligned` (`context_pairs`) reads an
    original line as a hunk's context its copy goes on with the hunk (and so does the copy of
    the line `follows` (`hunk_follows`) puts a sure hunk after), and each line keeps an
    indentation the texts give it (`indentations`)."""
    key = (vocab_key, n_vocab)
    index = _INDEXES.get(key) if vocab_key else None
    if index is None:
        index = VocabIndex(token_bytes, n_vocab)
        if vocab_key:
            if len(_INDEXES) >= 2:
                _INDEXES.pop(next(iter(_INDEXES)))
            _INDEXES[key] = index
    shown = [ln for ln, marker in snippet if not marker]
    own = [*original.split("\n"), *shown]
    ends = [ln for s in stop for ln in s.split("\n")]
    tails = [
        next((ln for ln in reversed(x) if ln.strip()), "") for x in (original.split("\n"), shown)
    ]
    keep = (
        LineOrder(
            (ln.encode("utf-8") for ln in original.split("\n")),
            ((ln.encode("utf-8"), marker) for ln, marker in snippet),
            aligned,
            follows,
        )
        if order
        else None
    )
    spill = max(_blank_run(original), _blank_run("\n".join(ln for ln, _ in snippet)))
    return LineSet(
        index,
        (t.encode("utf-8") for t in own),
        (t.encode("utf-8") for t in ends),
        (t.encode("utf-8") for t in tails),
        keep,
        spill,
        indentations(original.split("\n"), shown, ends) if order else None,
    )


def indentations(
    original: Sequence[str], shown: Sequence[str], ends: Sequence[str]
) -> dict[bytes, set[bytes]] | None:
    """Each line's indentations in the two texts, which a merged file keeps: a copied line
    as the original has it, a snippet line as the snippet does, the closing fence as the stop
    string has it (an indented fence stops nothing). None (indentation free) when
    the snippet shows a line of the original at an indentation the original never gives it:
    the snippet was re-indented, so its new lines' own indentation is not theirs in the file."""

    def table(lines: Sequence[str]) -> dict[bytes, set[bytes]]:
        out: dict[bytes, set[bytes]] = {}
        for ln in lines:
            raw = ln.encode("utf-8")
            key = raw.strip(b" \t")
            if key:
                out.setdefault(key, set()).add(raw[: len(raw) - len(raw.lstrip(b" \t"))])
        return out

    orig, snip = table(original), table(shown)
    if any(key in orig and not ws <= orig[key] for key, ws in snip.items()):
        return None
    for key, ws in [*snip.items(), *table(ends).items()]:
        orig.setdefault(key, set()).update(ws)
    return orig


def _blank_run(text: str) -> int:
    """The most blank lines in a row (the newline that ends the text opens none)."""
    most = run = 0
    for ln in text.splitlines():
        run = 0 if ln.strip() else run + 1
        most = max(most, run)
    return most

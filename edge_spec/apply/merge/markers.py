"""Marker lines of lazy edit snippets: which snippet lines stand for elided original code.

A line is a marker when its shape says "code left out here" and the original does not contradict
it. The shape test (`marker_shape`) accepts, in any comment syntax (`#`, `//`, `/* */`, `--`,
`<!-- -->`, `;`, `%`, `{/* */}`):

- an ellipsis alone (`// ...`, `# …`, `/* ... */`, `{/* ... */}`, or a bare `...` / `…` line);
- an ellipsis with a few words from the elision vocabulary (`// ... rest of the code unchanged`,
  `# ... previous code ...`, `// ... (keep existing implementation)`), or any short text framed
  by ellipses on both sides (`// ... handlers ...`);
- without an ellipsis, a short comment made only of elision words with at least one strong one
  (`/* unchanged */`, `// existing code`, `# rest of the file stays the same`,
  `// [unchanged code]`).

Ordinary comments fail the shape test because they carry words outside the vocabulary
(`# keep the cache warm`). The original then overrules the shape (`classify_markers`): a
marker-shaped line that also occurs in the original is code (context) when it sits in the snippet
where it sits in the original, that is, when a neighbour of it in the snippet is also its
neighbour in the original, or when none of its snippet neighbours is original code at all (so
nothing contradicts reading it as context). A bare Python `...` is the Ellipsis expression when it
is the body of a block header that is new in the snippet (a new stub `def f(): ...`), and by the
rule above when the original has it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from edge_spec.apply.merge.anchors import LineIndex, norm

_ELLIPSIS = re.compile(r"\.{3,}|…|\. \. \.")
# Longest openers first: `{/*` must win over `{`, `/**` over `/*`, `///` over `//`.
_COMMENT_OPENERS: tuple[tuple[str, str], ...] = (
    ("{/*", "*/}"),
    ("/**", "*/"),
    ("/*", "*/"),
    ("<!--", "-->"),
    ("(*", "*)"),
    ("//", ""),
    ("--", ""),
    ("#", ""),
    (";", ""),
    ("%", ""),
)
_WORD = re.compile(r"[a-z]+")

# Words that by themselves say "code elided here".
STRONG_WORDS = frozenset(
    """
existing unchanged rest remaining remainder previous previously prior same omitted omit omitting
elided elide elision unmodified untouched preserved identical snip snipped truncated skipped
""".split()
)
# Words that occur in markers but say nothing alone ("keep", "other" are common in real comments).
WEAK_WORDS = frozenset(
    """
the of a an code file files is are be stays stay remains remain as before here this that these
those and or in for to it its your my our all other others more etc so on function functions
method methods class classes implementation implementations body logic lines line content
contents section sections block blocks part parts definitions definition members fields
properties props imports import tests test cases helpers handlers config setup no changes change
changed not nothing original from with was were goes go continues continue follows following left
leave keep keeps kept modifications modification needed necessary like statements statement
declarations declaration types type routes exports
""".split()
)
LEXICON = STRONG_WORDS | WEAK_WORDS


@dataclass(frozen=True)
class Hunk:
    """A run of snippet lines between markers (or a snippet end)."""

    index: int
    lines: tuple[str, ...]
    start: int  # 0-based index of the first line in the snippet
    marker_before: bool
    marker_after: bool
    indent_before: int | None  # indentation width of the marker before, when there is one
    indent_after: int | None

    @property
    def span(self) -> tuple[int, int]:
        """1-based first and last snippet line."""
        return self.start + 1, self.start + len(self.lines)


def _strip_comment(text: str) -> tuple[str, bool]:
    for opener, closer in _COMMENT_OPENERS:
        if text.startswith(opener):
            body = text[len(opener) :]
            if closer and body.rstrip().endswith(closer):
                body = body.rstrip()[: -len(closer)]
            return body.strip().lstrip(opener[-1]).strip(), True
    return text, False


def _only_ellipsis(body: str) -> bool:
    return bool(_ELLIPSIS.search(body)) and not re.sub(r"[\s.…()\[\]{}<>:,;*/-]", "", body)


def marker_shape(line: str) -> bool:
    """Whether a line looks like an elision marker, by its text alone.

    >>> [marker_shape(s) for s in ("# ...", "// rest of the code unchanged", "# keep it warm")]
    [True, True, False]
    """
    text = line.strip()
    if not text:
        return False
    body, commented = _strip_comment(text)
    if _only_ellipsis(body):
        return True
    inner = body.strip("()[]{} ")
    has_ellipsis = bool(_ELLIPSIS.search(inner))
    words = _WORD.findall(inner.lower())
    if not words or len(words) > 10:
        return False
    framed = bool(_ELLIPSIS.match(inner)) and bool(re.search(r"(\.{3,}|…)$", inner))
    strong = sum(w in STRONG_WORDS for w in words)
    unknown = sum(w not in LEXICON for w in words)
    if not commented:  # a bare line: only framed elision text ("... existing code ...")
        return framed and unknown == 0 and len(words) <= 8
    if has_ellipsis:
        return (framed and len(words) <= 8) or (strong >= 1 and unknown <= 2) or unknown == 0
    return strong >= 1 and (unknown == 0 or (strong >= 2 and unknown <= 1))


def _indent(line: str) -> int:
    """Indentation width, tabs as 4 columns (as `structure.width` counts them)."""
    return len(line[: len(line) - len(line.lstrip(" \t"))].expandtabs(4))


def _neighbour(lines: Sequence[str], cand: Sequence[bool], j: int, step: int) -> str | None:
    k = j + step
    while 0 <= k < len(lines):
        if lines[k].strip() and not cand[k]:
            return norm(lines[k])
        k += step
    return None


def _sits_as_in_original(
    lines: Sequence[str], cand: Sequence[bool], j: int, index: LineIndex
) -> bool:
    """Whether a marker-shaped line that the original has sits where the original has it."""
    known = [
        (step, key)
        for step in (-1, 1)
        if (key := _neighbour(lines, cand, j, step)) is not None and key in index.pos
    ]
    if not known:
        return True
    for i in index.pos[norm(lines[j])]:
        for step, key in known:
            k = index.next_nonblank(i, step)
            if k is not None and index.keys[k] == key:
                return True
    return False


def _new_stub_body(lines: Sequence[str], j: int, index: LineIndex) -> bool:
    """A bare `...` indented under a block header that the original lacks: an Ellipsis body."""
    k = j - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    if k < 0:
        return False
    head = lines[k].rstrip()
    return head.endswith(":") and _indent(lines[j]) > _indent(head) and norm(head) not in index.pos


def classify_markers(lines: Sequence[str], index: LineIndex, language: str) -> list[bool]:
    """For each snippet line, whether it is a marker (elided original code)."""
    cand = [marker_shape(ln) for ln in lines]
    out = list(cand)
    for j, is_cand in enumerate(cand):
        if not is_cand:
            continue
        if norm(lines[j]) in index.pos:
            out[j] = not _sits_as_in_original(lines, cand, j, index)
        elif language == "python" and lines[j].strip() == "...":
            out[j] = not _new_stub_body(lines, j, index)
    return out


def snippet_markers(original: str, snippet: str, language: str = "") -> tuple[str, ...]:
    """The snippet's marker lines (stripped, in any wording) that are not lines of the original:
    an answer that writes one copied the snippet instead of the code it stands for."""
    olines = original.replace("\r\n", "\n").split("\n")
    slines = snippet.replace("\r\n", "\n").split("\n")
    have = {ln.strip() for ln in olines}
    flags = classify_markers(slines, LineIndex(olines), language)
    return tuple(
        dict.fromkeys(
            ln.strip() for ln, m in zip(slines, flags, strict=True) if m and ln.strip() not in have
        )
    )


def split_hunks(lines: Sequence[str], is_marker: Sequence[bool]) -> list[Hunk]:
    """The runs of non-marker lines, each with the markers around it."""
    hunks: list[Hunk] = []
    run: list[str] = []
    start = 0
    before: int | None = None
    for j, line in enumerate([*lines, None]):
        if line is not None and not is_marker[j]:
            if not run:
                start = j
            run.append(line)
            continue
        after = None if line is None else _indent(line)
        # blank lines alone before the first or after the last marker are formatting; between
        # two markers they may be new lines with no known place (the merge cannot be sure)
        if any(r.strip() for r in run) or (run and before is not None and after is not None):
            hunks.append(
                Hunk(
                    len(hunks),
                    tuple(run),
                    start,
                    before is not None,
                    after is not None,
                    before,
                    after,
                )
            )
        run = []
        if line is not None:
            before = after
    return hunks

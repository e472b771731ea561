"""A run of snippet lines written apart: code put between lines the snippet shows side by side.

Between two markers the snippet's lines stand together: no original code comes between them.
An answer that holds every snippet line in order can still break a run apart, writing the
run's new lines somewhere else (at the file's end, after the last test) and leaving the code
the run replaced or preceded where it was. So each run's non-blank lines must stand together
in the answer, blank lines aside.
"""

from __future__ import annotations

from collections.abc import Sequence

from edge_spec.apply.merge.anchors import LineIndex, norm
from edge_spec.apply.merge.markers import classify_markers


def _runs(original: Sequence[str], snippet: Sequence[str], language: str) -> list[list[int]]:
    """The snippet's runs between markers, as the (0-based) indices of their non-blank lines."""
    flags = classify_markers(snippet, LineIndex(original), language)
    out: list[list[int]] = [[]]
    for i, (ln, mark) in enumerate(zip(snippet, flags, strict=True)):
        if mark:
            out.append([])
        elif norm(ln):
            out[-1].append(i)
    return [r for r in out if len(r) > 1]


def _contiguous(block: Sequence[str], keys: Sequence[str]) -> bool:
    n = len(block)
    first = block[0]
    return any(
        keys[i] == first and list(keys[i : i + n]) == list(block) for i in range(len(keys) - n + 1)
    )


def runs_apart(original: str, snippet: str, answer: str, language: str) -> list[str]:
    """One finding per snippet run whose lines the answer does not write together."""
    olines = original.replace("\r\n", "\n").split("\n")
    slines = snippet.replace("\r\n", "\n").split("\n")
    akeys = [k for k in map(norm, answer.replace("\r\n", "\n").split("\n")) if k]
    out: list[str] = []
    for run in _runs(olines, slines, language):
        block = [norm(slines[i]) for i in run]
        if not _contiguous(block, akeys):
            out.append(
                f"snippet lines {run[0] + 1}-{run[-1] + 1} are not together in the answer: "
                "code is written between lines the snippet shows side by side"
            )
    return out

"""Apply's decode-time guards, part of the target: no invented elision markers (`build`,
`lines`), and an answer made only of the original's and the snippet's lines, in their order
(`lineset`, `order`, over a vocabulary index: `vocabindex`; what a placement reads as context:
`context`)."""

from edge_spec.apply.guard.build import apply_guard, indentations, lines_guard
from edge_spec.apply.guard.context import context_pairs, hunk_follows
from edge_spec.apply.guard.lines import LineContext, LineGuard, last_line, line_context

__all__ = [
    "LineContext",
    "LineGuard",
    "apply_guard",
    "context_pairs",
    "hunk_follows",
    "indentations",
    "last_line",
    "line_context",
    "lines_guard",
]

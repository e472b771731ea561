"""Lines next to a marker that stand a few lines off the boundary, then a rewrite of the lines
between: `}` / a fence / a blank, then a reworded paragraph, replaces that paragraph."""

from __future__ import annotations

import pytest
from mined import assert_sure_and_right, dev_task

from edge_spec.apply.merge import structural_merge

MD = """# Tool

```rust
fn main() {
    run();
}
```

If using the nightly channel, a trace is captured and printed with the
error. To see traces, enable them through the environment.

- Set `TRACE=1` to see them.
- Set `TRACE=0` to hide them.
"""

REWORDED = """If using the stable channel with the "trace" feature or the nightly channel, a
trace is captured and printed with the error. To see traces, enable them
through the environment.
"""

OLD = """If using the nightly channel, a trace is captured and printed with the
error. To see traces, enable them through the environment.
"""


def _snippet(paragraph: str) -> str:
    return (
        "<!-- ... existing code ... -->\n}\n```\n\n"
        + paragraph
        + "\n- Set `TRACE=1` to see them.\n<!-- ... existing code ... -->\n"
    )


def test_a_reworded_paragraph_after_reshown_closers_replaces_the_old_one() -> None:
    for lang in ("markdown", ""):
        merge = structural_merge(MD, _snippet(REWORDED), lang)
        assert merge.exact, [h.reason for h in merge.hunks]
        assert merge.text == MD.replace(OLD, REWORDED)


def test_new_text_unlike_the_lines_between_stays_unsure() -> None:
    # Nothing says the paragraph replaces the old one rather than joining it.
    other = "A different paragraph about installing the package\nfrom the registry.\n"
    assert not structural_merge(MD, _snippet(other), "markdown").exact


@pytest.mark.parametrize(
    ("name", "task_id"),
    [
        # A README paragraph reworded after a code block's `}` and fence.
        ("code_apply_mined.jsonl", "anyhow-58b873a-0"),
        # A Kotlin signature rewritten after the closers of the method above it.
        ("code_apply_mined2.jsonl", "clikt-dad1d5c-0"),
    ],
)
def test_mined_rewrites_after_reshown_lines(name: str, task_id: str) -> None:
    assert_sure_and_right(dev_task(name, task_id))


PY = """def load():
    a = read(1)
    b = read(2)
"""


def test_an_unmarked_end_rewrites_the_files_last_lines_it_reads_as() -> None:
    snippet = "# ... existing code ...\n    a = read(1)\n    b = read(20)\n"
    merge = structural_merge(PY, snippet, "python")
    assert merge.exact, [h.reason for h in merge.hunks]
    assert merge.text == PY.replace("read(2)", "read(20)")


def test_an_unmarked_end_short_of_more_original_lines_stays_unsure() -> None:
    # The snippet may have lost its marker: `c = read(3)` is not the old text of anything.
    longer = PY + "    c = read(3)\n"
    snippet = "# ... existing code ...\n    a = read(1)\n    b = read(20)\n"
    assert not structural_merge(longer, snippet, "python").exact


def test_a_mined_unmarked_end_on_a_reworded_last_line() -> None:
    assert_sure_and_right(dev_task("code_apply_mined.jsonl", "html5-boilerplate-11262ec-0"))

"""Lines next to a marker that stand a few lines off the boundary, then a rewrite of the lines
between: `}` / a fence / a blank, then a reworded paragraph, replaces that paragraph."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge_spec.apply.merge import structural_merge

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"

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
    task = next(
        t for t in map(json.loads, (DATA / name).read_text().splitlines()) if t["id"] == task_id
    )
    assert task.get("split", "dev") == "dev"
    for lang, path in ((task["language"], task["path"]), ("", None)):
        merge = structural_merge(task["original"], task["update"], lang, path)
        assert merge.exact, [h.reason for h in merge.hunks]
        assert merge.text == task["expected"]


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
    task = next(
        t
        for t in map(json.loads, (DATA / "code_apply_mined.jsonl").read_text().splitlines())
        if t["id"] == "html5-boilerplate-11262ec-0"
    )
    for lang, path in ((task["language"], task["path"]), ("", None)):
        merge = structural_merge(task["original"], task["update"], lang, path)
        assert merge.exact, [h.reason for h in merge.hunks]
        assert merge.text == task["expected"]

"""Whole definitions given in another order than the original's: one block, rewritten."""

from __future__ import annotations

import random
import sys
from itertools import permutations
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_spec.apply.merge import structural_merge

sys.path.insert(0, str(Path(__file__).parent))
from test_merge_property import _function  # noqa: E402

SHELL = """#!/usr/bin/env bash

prefix_lines() {
  while IFS= read -r line; do
    printf '# %s\\n' "$line"
  done
}

replace_filename() {
  local line
  while read -r line; do
    printf "%s\\n" "${line//$SOURCE/$FILENAME}"
  done
}

quote_code() {
  printf -v "$1" -- "%s" "$2"
}
"""


# The two first functions of SHELL, given the other way round.
SWAPPED = """replace_filename() {
  local line
  while read -r line; do
    printf "%s\\n" "${line//$SOURCE/$FILENAME}"
  done
}

prefix_lines() {
  while IFS= read -r line; do
    printf '# %s\\n' "$line"
  done
}
"""


def test_functions_reordered_in_shell() -> None:
    snippet = f"#!/usr/bin/env bash\n\n{SWAPPED}\n# ... existing code ...\n"
    first, second = SHELL.index("prefix_lines()"), SHELL.index("replace_filename()")
    third = SHELL.index("quote_code()")
    expected = (
        SHELL[:first]
        + SHELL[second:third].rstrip("\n")
        + "\n\n"
        + SHELL[first:second]
        + SHELL[third:]
    )
    result = structural_merge(SHELL, snippet, "bash")
    assert result.exact, result.hunks
    assert result.text == expected


def test_reordered_functions_apart_in_the_original_are_not_one_block() -> None:
    # Code between the two functions: the snippet does not say where it goes.
    original = SHELL.replace("\nreplace_filename()", '\nexport MODE="tap"\n\nreplace_filename()')
    snippet = f"# ... existing code ...\n{SWAPPED}# ... existing code ...\n"
    result = structural_merge(original, snippet, "bash")
    assert "whole definitions given in another order" not in [h.reason for h in result.hunks]


def _reorder_case(seed: int) -> tuple[str, str, str]:
    """A Python file of functions; two or three adjacent ones given whole in a new order (one
    body maybe changed), with or without markers and context around them."""
    rng = random.Random(seed)
    funcs = [_function(rng, f"f_{k}", "") for k in range(rng.randint(3, 7))]
    n = rng.randint(2, min(3, len(funcs)))
    at = rng.randrange(len(funcs) - n + 1)
    order = rng.choice([p for p in permutations(range(n)) if list(p) != sorted(p)])
    moved = [list(funcs[at + k]) for k in order]
    if rng.random() < 0.5:
        body = rng.choice(moved)
        body.insert(rng.randint(1, len(body)), f"    changed_{rng.randrange(99)}(a)")
    after_funcs = funcs[:at] + moved + funcs[at + n :]

    def join(items: list[list[str]]) -> list[str]:
        return [ln for it in items for ln in ["", "", *it]][2:]

    marker = rng.choice(["# ... existing code ...", "# ...", "# rest unchanged"])
    shown = join(moved)
    if at > 0 and rng.random() < 0.5:
        shown = [funcs[at - 1][-1], "", "", *shown]
    if at > 0 or rng.random() < 0.5:
        shown = [marker, *shown]
    if at + n < len(funcs):
        if rng.random() < 0.5:
            shown = [*shown, "", "", funcs[at + n][0]]
        shown = [*shown, marker]
    return (
        "\n".join(join(funcs)) + "\n",
        "\n".join(shown) + "\n",
        "\n".join(join(after_funcs)) + "\n",
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32))
def test_exact_reorders_are_right(seed: int) -> None:
    original, snippet, expected = _reorder_case(seed)
    result = structural_merge(original, snippet, "python")
    if result.exact:
        assert result.text == expected, (snippet, result.hunks)


def recall(n: int = 1000) -> float:
    """The share of reorder cases the merge is sure of (`python test_merge_reorder.py`)."""
    hits = 0
    for seed in range(n):
        original, snippet, expected = _reorder_case(seed)
        result = structural_merge(original, snippet, "python")
        assert not result.exact or result.text == expected, seed
        hits += result.exact
    return hits / n


if __name__ == "__main__":
    print(f"exact on {recall():.0%} of reorder cases")

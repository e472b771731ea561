"""Closing lines re-shown after changed code: a changed line before a marker followed by the
closers after it is a rewrite, not new code; an unmarked snippet end on the file's last line
(`end`, `}`) reaches the file's end when no more original lines go than the snippet puts back."""

from __future__ import annotations

import pytest
from mined import assert_sure_and_right, dev_task

from edge_spec.apply.merge import structural_merge

LUA = """local M = {}

function M.clear(self)
  for _, callback in ipairs(self.handles) do
    callback()
  end

  for i = 1, #self.handles do
    -- removing from the end keeps the indexes right
    table.remove(self.handles, i)
  end
end

function M.notify(self)
  self.handles[1]()
end

return M
"""

LUA_SNIPPET = """-- ... existing code ...
  for i = 1, #self.handles do
    -- removing from the end keeps the indexes right
    table.remove(self.handles)
  end
end

-- ... existing code ...
"""

GO = """package main

func load(name string) (*Item, error) {
	x, err := fetch(name)
	if x == nil {
		return nil, nil
	}
	return x, err
}

func save(x *Item) error {
	if x == nil {
		return nil
	}
	return store(x)
}
"""

# The guard may be new (before the nil check) or the nil check rewritten: both balance.
GO_SNIPPET = """// ... existing code ...
	x, err := fetch(name)
	if err != nil {
		return nil, nil
	}
// ... existing code ...
"""

PY = """def total(items):
    if not items:
        value = compute(items, 1)
    return value


def other(items):
    return value
"""

PY_SNIPPET = """# ... existing code ...
    if not items:
        value = compute(items, 2)
    return value
# ... existing code ...
"""


def test_a_changed_line_before_shown_closers_replaces_its_original() -> None:
    merge = structural_merge(LUA, LUA_SNIPPET, "lua")
    assert merge.exact, [h.reason for h in merge.hunks]
    assert merge.text == LUA.replace("table.remove(self.handles, i)", "table.remove(self.handles)")


def test_the_same_without_a_grammar() -> None:
    merge = structural_merge(PY, PY_SNIPPET)
    assert merge.exact, [h.reason for h in merge.hunks]
    assert merge.text == PY.replace("compute(items, 1)", "compute(items, 2)")


RB = """if $0 == __FILE__
  require 'rack'
  run_it
  more
end
"""


def test_an_unmarked_end_on_a_closer_deletes_no_more_than_it_puts_back() -> None:
    grown = "# ... existing code ...\n  require 'rack'\n  one\n  two\nend\n"
    merge = structural_merge(RB, grown, "ruby")
    assert merge.exact, [h.reason for h in merge.hunks]
    assert merge.text == RB.replace("  run_it\n  more\n", "  one\n  two\n")
    # Fewer new lines than the original has there: the snippet may have lost its marker.
    short = "# ... existing code ...\n  require 'rack'\n  one\nend\n"
    assert not structural_merge(RB, short, "ruby").exact


def test_a_new_block_that_balances_on_its_own_stays_unsure() -> None:
    # `if err != nil { return }` may be a new guard above the nil check as well.
    merge = structural_merge(GO, GO_SNIPPET, "go")
    assert not merge.exact


@pytest.mark.parametrize(
    ("name", "task_id"),
    [
        ("code_apply_mined.jsonl", "plenary.nvim-0dbe561-0"),
        ("code_apply_mined2.jsonl", "sinatra-32119ef-0"),
        ("code_apply_mined2.jsonl", "alamofire-44c8304-0"),
        # The snippet ends on the file's last `end`, with no marker after it.
        ("code_apply_mined.jsonl", "rack-69f11f6-0"),
    ],
)
def test_mined_rewrites_before_closers(name: str, task_id: str) -> None:
    assert_sure_and_right(dev_task(name, task_id), ws=True)

"""A snippet whose end has no marker, showing the file's last lines then new ones: the new lines
go at the file's end, even where those last lines also end every other test in the file."""

from __future__ import annotations

import pytest
from mined import assert_sure_and_right, dev_task

from edge_spec.apply.merge import structural_merge

TESTS = """import pytest
from shop import Cart


def test_empty():
    cart = Cart()
    assert cart.total() == 0
    cart.close()


def test_one_item():
    cart = Cart()
    cart.add("apple", 3)
    assert cart.total() == 3
    cart.close()


def test_two_items():
    cart = Cart()
    cart.add("apple", 3)
    cart.add("pear", 4)
    assert cart.total() == 7
    cart.close()
"""

NEW = """

def test_discount():
    cart = Cart(discount=0.5)
    cart.add("apple", 4)
    assert cart.total() == 2
    cart.close()
"""


def test_new_lines_after_the_files_last_lines_go_at_its_end() -> None:
    # `cart.close()` ends every test; shown last with no marker below, it is the file's end.
    short = "\n\ndef test_none():\n    assert Cart(None).total() == 0\n"
    snippet = "# ... existing code ...\n    cart.close()" + short
    for lang in ("python", ""):
        merge = structural_merge(TESTS, snippet, lang)
        assert merge.exact, [h.reason for h in merge.hunks]
        assert merge.text == TESTS + short[1:]


def test_a_last_block_rewritten_stays_unsure() -> None:
    # As many new lines as the last test has: they may replace it (a snippet reaching the
    # file's end from the test before) as well as follow it.
    snippet = "# ... existing code ...\n    cart.close()" + NEW
    for lang in ("python", ""):
        assert not structural_merge(TESTS, snippet, lang).exact


def test_lines_that_are_not_the_files_last_stay_unsure() -> None:
    # `cart.close()` ends three tests but not the file: nothing says after which the test goes.
    last = TESTS + "\n\ndef test_last():\n    assert Cart().empty\n"
    snippet = "# ... existing code ...\n    cart.close()" + NEW
    assert not structural_merge(last, snippet, "python").exact


def test_a_marker_below_leaves_the_place_open() -> None:
    snippet = "# ... existing code ...\n    cart.close()" + NEW + "# ... existing code ...\n"
    assert not structural_merge(TESTS, snippet, "python").exact


def test_a_definition_the_file_has_is_replaced_not_appended() -> None:
    # The new lines redefine a test the file has: a replacement by name, not an addition.
    changed = "\n\ndef test_empty():\n    cart = Cart()\n    assert cart.total() == 0.0\n"
    snippet = "# ... existing code ...\n    assert cart.total() == 7\n    cart.close()" + changed
    for lang in ("python", ""):
        merge = structural_merge(TESTS, snippet, lang)
        assert merge.text.count("def test_empty") == 1 or not merge.exact


@pytest.mark.parametrize(
    ("name", "task_id"),
    [
        # A README section added after a code block whose lines also stand further up.
        ("code_apply_mined3.jsonl", "mux-ca524fd-0"),
        # A test appended to a file whose tests all end `await server.close(); });`.
        ("code_apply_mined3.jsonl", "ky-cd33a63-0"),
    ],
)
def test_mined_tasks_that_append_at_the_files_end(name: str, task_id: str) -> None:
    assert_sure_and_right(dev_task(name, task_id))

"""The file's first or last line written twice (`apply.check.ends`)."""

from __future__ import annotations

from edge_spec.apply.check.ends import ends_twice

ORIG = """#!/bin/sh
PREFIX="$1"
mkdir -p "$PREFIX/bin"
cp bin/* "$PREFIX/bin"
echo "Installed to $PREFIX"
"""
# No marker after the last line: the snippet reaches the file's end, whose last line it shows.
SNIPPET = """# ... existing code ...
PREFIX="$1"
install -d "$PREFIX/bin"
install bin/* "$PREFIX/bin"
echo "Installed to $PREFIX"
"""
RIGHT = """#!/bin/sh
PREFIX="$1"
install -d "$PREFIX/bin"
install bin/* "$PREFIX/bin"
echo "Installed to $PREFIX"
"""
# The snippet's lines inserted, the original's tail kept after them.
KEPT_TAIL = """#!/bin/sh
PREFIX="$1"
install -d "$PREFIX/bin"
install bin/* "$PREFIX/bin"
echo "Installed to $PREFIX"
mkdir -p "$PREFIX/bin"
cp bin/* "$PREFIX/bin"
echo "Installed to $PREFIX"
"""


def test_the_last_line_written_twice_is_found() -> None:
    assert ends_twice(ORIG, SNIPPET, RIGHT, "bash") == []
    found = ends_twice(ORIG, SNIPPET, KEPT_TAIL, "bash")
    assert len(found) == 1 and "last line" in found[0]


def test_the_first_line_written_twice_is_found() -> None:
    orig = "package a;\n\nimport b.C;\n\nclass D {}\n"
    snippet = "package a;\n\nimport b.C;\nimport b.E;\n// ... existing code ...\n"
    doubled = "package a;\n\nimport b.C;\nimport b.E;\npackage a;\n\nimport b.C;\n\nclass D {}\n"
    assert ends_twice(orig, snippet, doubled, "java")
    right = "package a;\n\nimport b.C;\nimport b.E;\n\nclass D {}\n"
    assert ends_twice(orig, snippet, right, "java") == []


def test_an_edge_line_the_snippet_shows_twice_or_marks_is_not_flagged() -> None:
    # A new test appended at the end repeats the last test's final assertion: the snippet shows
    # that line twice, so the answer holding it twice is right.
    orig = "func testA() {\n    run()\n    check(x)\n}\n"
    snippet = (
        "// ... existing code ...\n    check(x)\n}\n\nfunc testB() {\n    run2()\n    check(x)\n}\n"
    )
    answer = orig + "\nfunc testB() {\n    run2()\n    check(x)\n}\n"
    assert ends_twice(orig, snippet, answer, "swift") == []
    # A marker after the last line: the snippet does not reach the file's end.
    marked = SNIPPET + "# ... existing code ...\n"
    assert ends_twice(ORIG, marked, KEPT_TAIL, "bash") == []

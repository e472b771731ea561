"""The check of a model's answer: right answers pass, the wrong ones models write are caught."""

from __future__ import annotations

import json
from pathlib import Path

from edge_spec.apply import lazy_lines
from edge_spec.apply.check.gaps import marker_gaps
from edge_spec.apply.check.shown import unshown_changes
from edge_spec.apply.check.together import runs_apart
from edge_spec.apply.check.twins import kept_beside
from edge_spec.apply.check.verdict import (
    answer_doubts,
    answer_problems,
    snippet_lines_missing,
    unplaced_changes,
)
from edge_spec.apply.merge import structural_merge
from edge_spec.apply.merge.markers import snippet_markers
from edge_spec.apply.merge.syntax import definitions, parse
from edge_spec.bench.modes import read_text

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"

ORIG = """import os


def load(path):
    with open(path) as f:
        data = f.read()
    return data


def save(path, data):
    with open(path, "w") as f:
        f.write(data)


def remove(path):
    os.remove(path)
"""
SNIPPET = """# ... existing code ...
def load(path):
    with open(path, encoding="utf-8") as f:
        data = f.read()
    return data
# ... existing code ...
"""
RIGHT = ORIG.replace("open(path) as f", 'open(path, encoding="utf-8") as f')


def _problems(answer: str, snippet: str = SNIPPET, original: str = ORIG) -> list[str]:
    merge = structural_merge(original, snippet, "python", "x.py")
    return answer_problems(original, snippet, answer, merge)


def test_the_right_answer_passes() -> None:
    assert _problems(RIGHT) == []


def test_dropped_lines_far_from_the_edit_are_caught() -> None:
    dropped = RIGHT.replace("def remove(path):\n    os.remove(path)\n", "")
    assert any("dropped outside the edited regions" in p for p in _problems(dropped))


def test_old_code_kept_beside_the_new_is_caught() -> None:
    both = RIGHT.replace(
        "        data = f.read()\n", "        data = f.read()\n    with open(path) as f:\n", 1
    )
    assert _problems(both)


def test_an_altered_line_elsewhere_is_caught() -> None:
    changed = RIGHT.replace("f.write(data)", "f.write(data.strip())")
    assert any("changed outside the edited regions" in p for p in _problems(changed))


def test_the_original_returned_unchanged_is_caught() -> None:
    assert _problems(ORIG)


def test_a_deletion_shown_by_adjacent_context_lines() -> None:
    # Context lines with nothing between them: `save` is deleted.
    snippet = (
        "# ... existing code ...\n    return data\n\n\ndef remove(path):\n# ... existing code ...\n"
    )
    right = ORIG.replace(
        'def save(path, data):\n    with open(path, "w") as f:\n        f.write(data)\n\n\n', ""
    )
    assert _problems(right, snippet) == []
    assert any("not in the answer" in p for p in _problems(ORIG, snippet))


def test_a_whole_function_replaced_by_name_to_its_end() -> None:
    snippet = (
        "# ... existing code ...\ndef save(path, data):\n    print(path)\n# ... existing code ...\n"
    )
    right = ORIG.replace(
        '    with open(path, "w") as f:\n        f.write(data)\n', "    print(path)\n"
    )
    merge = structural_merge(ORIG, snippet, "python", "x.py")
    assert unshown_changes(ORIG, snippet, right, merge) == []
    wrong = right.replace("def remove(path):\n    os.remove(path)\n", "")
    assert unshown_changes(ORIG, snippet, wrong, merge)


def test_a_method_rewritten_with_a_new_signature_between_markers() -> None:
    # The shipped demo: the snippet gives `set` whole, its signature changed, markers around it;
    # the line above the method is the end of the one before (deeper indentation).
    ex = Path(__file__).resolve().parents[2] / "examples" / "apply"
    orig, snippet, right = (
        (ex / n).read_text() for n in ("original.py", "update.py", "expected.py")
    )
    merge = structural_merge(orig, snippet, "python", "original.py")
    assert unshown_changes(orig, snippet, right, merge) == []
    assert answer_problems(orig, snippet, right, merge) == []
    # The same rewrite that also drops the method before it is still caught.
    start, end = right.index("    def get("), right.index("    def set(")
    assert unshown_changes(orig, snippet, right[:start] + right[end:], merge)
    # So is a rewrite put in place of a method of another name.
    start, end = orig.index("    def delete("), orig.index("    def __len__(")
    misplaced = (
        orig[:start]
        + right[right.index("    def set(") : right.index("    def delete(")]
        + orig[end:]
    )
    assert unshown_changes(orig, snippet, misplaced, merge)


def test_a_replacement_the_snippet_does_not_place_is_not_trusted() -> None:
    # No context: the snippet does not say which line the new one replaces.
    snippet = "# ... existing code ...\n    return data.upper()\n# ... existing code ...\n"
    guess = ORIG.replace("    return data\n", "    return data.upper()\n")
    merge = structural_merge(ORIG, snippet, "python", "x.py")
    assert not merge.exact  # the premise: the merge cannot place it either
    assert unshown_changes(ORIG, snippet, guess, merge)


def _tasks() -> list[dict]:
    return [
        json.loads(line)
        for name in ("code_apply_dev.jsonl.gz", "code_apply_dev_messy.jsonl.gz")
        for line in read_text(DATA / name).splitlines()
        if line.strip()
    ]


def test_no_expected_dev_file_gets_a_structural_finding() -> None:
    # Every right answer of the 436 dev tasks, clean and messy, passes the structural checks
    # (the merge's own-guess rule aside, which by design flags an unconfirmed guess).
    bad = []
    for t in _tasks():
        merge = structural_merge(t["original"], t["update"], t["language"], t["path"])
        found = unplaced_changes(t["original"], t["update"], t["expected"], merge)
        if found:
            bad.append((t["id"], found[0]))
    assert bad == []


def test_no_expected_dev_file_counts_as_lazy() -> None:
    # Marker-shaped comments count as lazy lines only where the original lacks them: the
    # expected files of the dev tasks (real commits) have none.
    bad = [
        t["id"]
        for t in _tasks()
        if lazy_lines(
            t["expected"], t["original"], snippet_markers(t["original"], t["update"], t["language"])
        )
    ]
    assert bad == []


IMPORTS = """import os
import subprocess


def load(path):
    with open(path) as f:
        return f.read()


def save(path, data):
    with open(path, "w") as f:
        f.write(data)
"""
NEW_FN = """import os
import subprocess
# ... existing code ...


def run(cmd):
    return subprocess.run(cmd, check=True)
"""


def test_an_answer_that_drops_the_code_under_a_marker_is_caught() -> None:
    # What IDE users report most: the code between the imports and a new function dropped.
    right = IMPORTS + "\n\ndef run(cmd):\n    return subprocess.run(cmd, check=True)\n"
    merge = structural_merge(IMPORTS, NEW_FN, "python", "x.py")
    assert unshown_changes(IMPORTS, NEW_FN, right, merge) == []
    dropped = "import os\nimport subprocess\n\n\n" + right[right.index("def run(") :]
    assert any(
        "not kept where the snippet's marker says" in p for p in _problems(dropped, NEW_FN, IMPORTS)
    )
    # Also when only part of it goes, and whatever the merge made of the snippet.
    part = right.replace(
        "def load(path):\n    with open(path) as f:\n        return f.read()\n\n\n", ""
    )
    assert marker_gaps(IMPORTS, NEW_FN, part, "python")
    assert marker_gaps(IMPORTS, NEW_FN, right, "python") == []


def test_the_marker_check_passes_every_expected_dev_file() -> None:
    bad = [
        t["id"]
        for t in _tasks()
        if marker_gaps(t["original"], t["update"], t["expected"], t["language"])
    ]
    assert bad == []


def test_an_answer_that_keeps_a_moved_definitions_old_copy_is_flagged() -> None:
    original = "def a():\n    return 1\n\n\ndef b():\n    return 2\n\n\ndef c():\n    return 3\n"
    snippet = "def c():\n    return 3\n\n\ndef a():\n    return 1\n\n\n# ... existing code ...\n"
    moved = "def c():\n    return 3\n\n\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n"
    both = snippet.replace("# ... existing code ...\n", "def b():\n    return 2\n\n\n") + (
        "def c():\n    return 3\n"
    )
    merge = structural_merge(original, snippet, "python")
    assert any("defines c 2 times" in p for p in answer_problems(original, snippet, both, merge))
    assert not any("times" in p for p in answer_problems(original, snippet, moved, merge))


PHP = """<?php

namespace Slim;

use \\Psr\\Http\\Message\\RequestInterface;
use \\Psr\\Http\\Message\\ResponseInterface;
use \\Slim\\Interfaces\\RouteInterface;

class Route implements RouteInterface
{
}
"""
PHP_SNIPPET = """<?php
// ... existing code ...
namespace Slim;

use Psr\\Http\\Message\\{RequestInterface, ResponseInterface};
use Slim\\Interfaces\\RouteInterface;

// ... existing code ...
"""


def test_new_lines_written_beside_the_old_ones_they_rewrite_are_caught() -> None:
    # Next to a marker, new imports may replace the old ones or come in addition; the same
    # names imported twice say they replace them.
    old = PHP.split("use ")[1:4]
    right = PHP.replace(
        "use " + "use ".join(old),
        PHP_SNIPPET.split("namespace Slim;\n\n")[1].split("\n\n")[0] + "\n",
    )
    both = PHP.replace(
        "namespace Slim;\n",
        "namespace Slim;\n\n" + PHP_SNIPPET.split("namespace Slim;\n\n")[1].split("\n\n")[0] + "\n",
    )
    assert kept_beside(PHP, PHP_SNIPPET, both, "php")
    assert kept_beside(PHP, PHP_SNIPPET, right, "php") == []
    merge = structural_merge(PHP, PHP_SNIPPET, "php", "Route.php")
    assert any("old and new versions" in p for p in answer_problems(PHP, PHP_SNIPPET, both, merge))


def test_a_like_line_is_no_twin_where_shown_lines_close_the_block() -> None:
    # A second call much like one beside it, both sides of the new block shown: an addition.
    original = "def t():\n    f(a, b)\n\n\ndef u():\n    pass\n"
    snippet = "def t():\n    f(a, b)\n    f(a, b, c)\n\n\ndef u():\n# ... existing code ...\n"
    answer = "def t():\n    f(a, b)\n    f(a, b, c)\n\n\ndef u():\n    pass\n"
    assert kept_beside(original, snippet, answer, "python") == []


def test_a_marker_does_not_cover_lines_the_snippet_shows_after_its_next_run() -> None:
    # The snippet reorders two initialisers; the code between the type's header and the first
    # of them stays under the marker, though later lines of the file are shown further on.
    original = (
        "struct InputOrigin {\n  enum E { case a }\n  private var x = 1\n\n  init() {\n  }\n\n"
        "  init(b: Int) {\n    x = b\n  }\n\n  init(a: Int) {\n    x = a\n  }\n}\n"
    )
    snippet = (
        "struct InputOrigin {\n  // ... existing code ...\n  init() {\n  }\n\n  init(a: Int) {\n"
        "    x = a\n  }\n\n  init(b: Int) {\n    x = b\n  }\n}\n"
    )
    right = original.replace(
        "  init(b: Int) {\n    x = b\n  }\n\n  init(a: Int) {\n    x = a\n  }\n",
        "  init(a: Int) {\n    x = a\n  }\n\n  init(b: Int) {\n    x = b\n  }\n",
    )
    dropped = right.replace("  enum E { case a }\n  private var x = 1\n\n", "")
    assert marker_gaps(original, snippet, right, "swift") == []
    assert marker_gaps(original, snippet, dropped, "swift")


def test_a_marker_between_adjacent_blocks_stands_for_nothing() -> None:
    original = "func a() {\n\tx()\n}\n\nfunc b() {\n\ty()\n}\n"
    snippet = "func a() {\n\tz()\n}\n// ... existing code ...\nfunc b() {\n\ty()\n}\n"
    right = original.replace("x()", "z()")
    assert marker_gaps(original, snippet, right, "go") == []


def test_an_added_overload_is_not_a_definition_written_twice() -> None:
    original = (
        "class E : Exception\n{\n    public E() { }\n\n    public E(string m) : base(m) { }\n}\n"
    )
    snippet = (
        "class E : Exception\n{\n    // ... existing code ...\n    public E(string m) : base(m) { }\n"
        "\n    public E(string m, Exception inner) : base(m, inner) { }\n}\n"
    )
    answer = original.replace(
        "base(m) { }\n",
        "base(m) { }\n\n    public E(string m, Exception inner) : base(m, inner) { }\n",
    )
    merge = structural_merge(original, snippet, "c_sharp", "E.cs")
    assert not any("times" in p for p in answer_problems(original, snippet, answer, merge))


def test_a_run_after_a_marker_does_not_take_the_place_of_the_lines_above_it() -> None:
    # The marker keeps the class's fields; a run after it rewrites only what it names.
    original = "class A:\n    x = 1\n    y = 2\n\n    def f(self):\n        return 1\n"
    snippet = "class A:\n    # ... existing code ...\n    def f(self, z):\n        return z\n"
    right = original.replace("def f(self):\n        return 1", "def f(self, z):\n        return z")
    wrong = "class A:\n    def f(self, z):\n        return z\n"
    merge = structural_merge(original, snippet, "python", "a.py")
    assert unshown_changes(original, snippet, right, merge) == []
    assert unshown_changes(original, snippet, wrong, merge)


def test_a_removal_the_snippet_reads_as_well_without_is_not_shown() -> None:
    # The snippet rewrites a loop and ends on the method's `}` before a marker. An answer that
    # also drops the overload below (the diff slides it to begin with that `}`) still has the
    # snippet's lines next to each other, but the snippet reads as well with the overload kept.
    original = """class Writer {
  Appendable write(Appendable out) {
    for (Item item : items) {
      item.write(out).append('\\n');
    }
    return out;
  }

  void file(Filer filer) {
    file(filer, name());
  }

  void file(Filer filer, String name) {
    open(filer, name);
  }
}
"""
    snippet = """// ... existing code ...
  Appendable write(Appendable out) {
    String sep = "";
    for (Item item : items) {
      out.append(sep);
      item.write(out);
      sep = "\\n";
    }
    return out;
  }
// ... existing code ...
"""
    right = original.replace(
        "    for (Item item : items) {\n      item.write(out).append('\\n');\n    }\n",
        '    String sep = "";\n    for (Item item : items) {\n      out.append(sep);\n'
        '      item.write(out);\n      sep = "\\n";\n    }\n',
    )
    wrong = right.replace("  void file(Filer filer) {\n    file(filer, name());\n  }\n\n", "")
    merge = structural_merge(original, snippet, "java")
    assert not unshown_changes(original, snippet, right, merge)
    assert unshown_changes(original, snippet, wrong, merge)


def test_a_line_written_again_beside_its_original_is_not_shown() -> None:
    # The snippet starts after a marker with the `}` that closes `main`; a reading that keeps
    # the original's `}` and writes the snippet's below it doubles the line. The inserted `}`
    # has the snippet's neighbour below it, but the snippet never shows `}` twice in a row.
    original = "# Demo\n\n```go\nfunc main() {\n\trun()\n}\n```\n\nMore text.\n"
    snippet = "<!-- ... existing code ... -->\n}\n```\n\nMore text, and a new line.\n"
    right = original.replace("More text.\n", "More text, and a new line.\n")
    doubled = right.replace("}\n```", "}\n}\n```")
    merge = structural_merge(original, snippet, "markdown")
    assert not unshown_changes(original, snippet, right, merge)
    assert unshown_changes(original, snippet, doubled, merge)


RUST_TESTS = """#[test]
fn test_a() {
    let mut buf = Vec::new();
    buf.put_u8(1);
    assert_eq!(b"\\x01", &buf[..]);
}

#[test]
fn test_b() {
    let mut buf = Vec::new();
    buf.put_u16(2);
    assert_eq!(b"\\x00\\x02", &buf[..]);
}

#[test]
fn test_c() {
    let mut buf = Vec::new();
    buf.put_u32(3);
}
"""
NEW_TEST = """// ... existing code ...
    buf.put_u8(1);
    assert_eq!(b"\\x01", &buf[..]);
}

#[test]
fn test_a_twice() {
    let mut buf = Vec::new();
    buf.put_u8(1);
    buf.put_u8(1);
}

#[test]
// ... existing code ...
"""


def test_a_snippet_run_written_apart_is_caught() -> None:
    # Every snippet line is in the answer, in order, but the new test went to the file's end:
    # the code after the context it was shown beside came between them.
    added = NEW_TEST.split("}\n\n", 1)[1].rsplit("#[test]\n", 1)[0]
    right = RUST_TESTS.replace("}\n\n#[test]\nfn test_b", "}\n\n" + added + "#[test]\nfn test_b")
    apart = RUST_TESTS + "\n" + added + "#[test]\nfn test_z() {}\n"
    assert runs_apart(RUST_TESTS, NEW_TEST, right, "rust") == []
    found = runs_apart(RUST_TESTS, NEW_TEST, apart, "rust")
    assert found and "not together in the answer" in found[0]
    merge = structural_merge(RUST_TESTS, NEW_TEST, "rust", "t.rs")
    assert snippet_lines_missing_none(NEW_TEST, apart)
    assert any("not together" in p for p in answer_problems(RUST_TESTS, NEW_TEST, apart, merge))


def snippet_lines_missing_none(snippet: str, answer: str) -> bool:
    """The order check alone passes the answer (the run check is what catches it)."""
    return snippet_lines_missing(snippet.splitlines(), answer.splitlines()) == []


def test_every_expected_dev_file_keeps_the_snippet_runs_together() -> None:
    bad = [
        t["id"]
        for t in _tasks()
        if runs_apart(t["original"], t["update"], t["expected"], t["language"])
    ]
    assert bad == []


def test_marker_keeps_the_lines_before_its_block_when_the_snippet_moves_code() -> None:
    original = """describe "x" do
  specify "a" do
    res = get("a")
    env["PORT"].should.equal "80"
    env["HTTPS"].should.equal "on"
  end

  specify "c" do
    go
  end
end
"""
    # The new test repeats a line of the old one: a coincidence, not code moved out from under
    # the marker, which still stands for the old test's first lines.
    snippet = """# ... existing code ...
    env["HTTPS"].should.equal "on"
  end

  specify "b" do
    res = get("b")
    env["PORT"].should.equal "80"
  end
# ... existing code ...
"""
    new = '\n  specify "b" do\n    res = get("b")\n    env["PORT"].should.equal "80"\n  end\n'
    right = original.replace('  end\n\n  specify "c"', "  end\n" + new + '\n  specify "c"')
    assert marker_gaps(original, snippet, right, "ruby") == []
    eaten = right.replace('    res = get("a")\n    env["PORT"].should.equal "80"\n', "", 1)
    assert marker_gaps(original, snippet, eaten, "ruby")


def test_a_definition_gone_unnamed_is_a_warning_not_a_refusal() -> None:
    # `}` then a new test: inserted after `test_save`, or `test_save` renamed and rewritten?
    original = (
        "class T:\n    def test_load(self):\n        assert load('a') == 1\n\n"
        "    def test_save(self):\n        assert save('a') == 2\n\n"
        "    def test_remove(self):\n        assert remove('a') == 3\n"
    )
    update = (
        "# ... existing code ...\n        assert load('a') == 1\n\n"
        "    def test_copy(self):\n        assert copy('a') == 4\n\n"
        "    def test_remove(self):\n# ... existing code ...\n"
    )
    inserted = original.replace(
        "    def test_remove",
        "    def test_copy(self):\n        assert copy('a') == 4\n\n    def test_remove",
    )
    renamed = original.replace(
        "test_save(self):\n        assert save('a') == 2",
        "test_copy(self):\n        assert copy('a') == 4",
    )
    assert answer_doubts(original, update, inserted, "python") == []
    (doubt,) = answer_doubts(original, update, renamed, "python")
    assert "function test_save (original lines 5-6)" in doubt
    # A name the snippet writes (a call, a deletion it shows) is said, and so is no grammar.
    assert answer_doubts(original, update + "# test_save is gone\n", renamed, "python") == []
    assert answer_doubts(original, update, renamed, "") == []


def test_a_definition_gone_is_seen_under_conditional_code_that_does_not_parse() -> None:
    # A C# file under `#if`, whose first test has a directive inside a call chain (an error to
    # the grammar): the test's name still shows, and so does its loss.
    original = (
        "#if SETTINGS\nusing Xunit;\n\nnamespace N\n{\n    public class T\n    {\n"
        "        [Fact]\n        public void FindsMethods()\n        {\n"
        "            var m = Find(typeof(int)\n#if CORE\n                .GetTypeInfo()\n#endif\n"
        "                .Assembly);\n            Assert.Equal(5, m.Count);\n        }\n\n"
        "        [Fact]\n        public void AppliesProperties()\n        {\n"
        "            Assert.True(Apply());\n        }\n    }\n}\n#endif\n"
    )
    update = (
        "// ... existing code ...\n        }\n\n        [Fact]\n"
        "        public void FindsEnrichers()\n        {\n            Assert.True(Enrich());\n"
        "        }\n\n        [Fact]\n        public void AppliesProperties()\n"
        "// ... existing code ...\n"
    )
    new = "        public void FindsEnrichers()\n        {\n            Assert.True(Enrich());\n"
    start = original.index("        public void FindsMethods")
    end = original.index("        }\n\n        [Fact]\n        public void Applies")
    renamed = original[:start] + new + original[end:]
    inserted = original.replace(
        "        [Fact]\n        public void Applies",
        new + "        }\n\n        [Fact]\n        public void Applies",
    )
    assert definitions("csharp", parse("csharp", original.encode()))
    assert answer_doubts(original, update, inserted, "csharp") == []
    (doubt,) = answer_doubts(original, update, renamed, "csharp")
    assert "function FindsMethods" in doubt


def test_a_header_guard_hides_no_definition() -> None:
    header = (
        "#ifndef A_H\n#define A_H\n\nint add(int a, int b);\n\n"
        "static int twice(int a)\n{\n    return 2 * a;\n}\n\n#endif\n"
    )
    assert [d.name for d in definitions("c", parse("c", header.encode()))] == ["twice"]


OLD_RESET = """    public void Reset()
    {
        Reset(null);
    }

    protected void Reset(Context context)
    {
        using (TimedLock.Lock(_lock))
        {
            _state = CircuitState.Closed;
            if (priorState != CircuitState.Closed)
            {
                _onReset(context);
            }
        }
    }
"""
NEW_RESET = """    public void Reset()
    {
        OnCircuitReset(null);
    }

    protected void ResetInternal(Context context)
    {
        _state = CircuitState.Closed;
        if (priorState != CircuitState.Closed)
        {
            _onReset(context);
        }
    }
"""
TRIP = """
    public void Trip()
    {
        _state = CircuitState.Open;
    }
"""
LAST = "\n    public abstract void OnActionFailure(Exception ex);\n}\n"
BREAKER = "public class Breaker\n{\n" + OLD_RESET + TRIP + LAST
BREAKER_SNIPPET = (
    "// ... existing code ...\n" + NEW_RESET + "\n    // ... existing code ...\n" + LAST
)
BREAKER_MERGED = "public class Breaker\n{\n" + NEW_RESET + TRIP + LAST


def test_a_block_moved_out_of_its_parent_is_no_context_for_the_marker() -> None:
    # The run's tail (`_onReset(context);` and two closers) is found once in the original, one
    # level deeper: it was taken out of the `using` block, so the `}` that follows it there (the
    # old method's own) is no code the marker after it keeps.
    assert marker_gaps(BREAKER, BREAKER_SNIPPET, BREAKER_MERGED, "csharp") == []
    dropped = BREAKER_MERGED.replace(
        "    public abstract void OnActionFailure(Exception ex);\n", ""
    )
    merge = structural_merge(BREAKER, BREAKER_SNIPPET, "csharp")
    assert any("dropped" in p for p in answer_problems(BREAKER, BREAKER_SNIPPET, dropped, merge))

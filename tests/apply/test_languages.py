"""The one language table: every grammar parses offline, and prompts and merge agree per file."""

from __future__ import annotations

import pytest

from edge_spec.apply.languages import LANGUAGES, canonical, fence_tag, language, marker_line
from edge_spec.apply.merge import detect_language
from edge_spec.apply.merge.markers import marker_shape
from edge_spec.apply.merge.syntax import guess_language, parse, parser_for

# A small valid file per language: its grammar must parse it without an error.
SAMPLES = {
    "python": "def f(x):\n    return x\n",
    "javascript": "function f(x) { return x; }\n",
    "typescript": "function f(x: number): number { return x; }\n",
    "tsx": "const A = () => <div>x</div>;\n",
    "go": "package p\n\nfunc F() {}\n",
    "rust": "fn f() -> i32 { 1 }\n",
    "java": "class A { int f() { return 1; } }\n",
    "c": "int f(void) { return 1; }\n",
    "cpp": "struct A { int f() { return 1; } };\n",
    "csharp": "class A { int F() { return 1; } }\n",
    "kotlin": "fun f(): Int { return 1 }\n",
    "swift": "func f() -> Int { return 1 }\n",
    "scala": "object O { def f(): Int = 1 }\n",
    "php": "<?php\nfunction f() { return 1; }\n",
    "ruby": "def f\n  1\nend\n",
    "lua": "function f() return 1 end\n",
    "bash": "f() {\n  echo 1\n}\n",
    "sql": "SELECT a FROM t;\n",
    "yaml": "a: 1\nb: [2, 3]\n",
    "toml": "a = 1\n[b]\nc = 2\n",
    "json": '{"a": [1, 2]}\n',
    "html": "<div><p>x</p></div>\n",
    "css": "a { color: red; }\n",
    "markdown": "# Title\n\nText.\n",
}


def test_twenty_plus_languages_with_grammars() -> None:
    assert len([row for row in LANGUAGES if row.grammar]) >= 20
    assert set(SAMPLES) == {row.name for row in LANGUAGES}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_grammar_parses_offline(name: str) -> None:
    assert parser_for(name) is not None, f"no grammar wheel for {name}"
    tree = parse(name, SAMPLES[name].encode())
    assert tree is not None and not tree.root_node.has_error


@pytest.mark.parametrize("row", LANGUAGES, ids=lambda r: r.name)
def test_marker_line_is_a_marker(row) -> None:
    assert marker_shape(row.marker())


@pytest.mark.parametrize(
    "path, lang, fence",
    [
        ("a.py", "python", "python"),
        ("a.pyi", "python", "python"),
        ("x/b.hpp", "cpp", "cpp"),
        ("A.kt", "kotlin", "kotlin"),
        ("c.jsx", "javascript", "jsx"),
        ("c.tsx", "tsx", "tsx"),
        ("d.cs", "csharp", "csharp"),
        ("e.rb", "ruby", "ruby"),
        ("f.SH", "bash", "bash"),
        ("g.yml", "yaml", "yaml"),
        ("h.unknown", "", ""),
        ("-", "", ""),
    ],
)
def test_one_table_for_prompts_and_merge(path: str, lang: str, fence: str) -> None:
    assert detect_language(path=path) == lang == canonical(path=path)
    assert fence_tag(path) == fence
    if fence:  # the fence tag read back as a language name is the same language
        assert canonical(fence) == lang


def test_aliases_and_markers() -> None:
    assert language("C++").name == "cpp" and language("golang").name == "go"
    assert canonical("Shell") == "bash" and canonical("brainfuck") == "brainfuck"
    assert marker_line("python") == "# ... existing code ..."
    assert marker_line("lua") == "-- ... existing code ..."
    assert marker_line("html") == "<!-- ... existing code ... -->"
    assert marker_line("nope") == "// ... existing code ..."


@pytest.mark.parametrize(
    "text, lang",
    [
        ("#!/usr/bin/env bash\necho hi\n", "bash"),
        ("#!/usr/bin/python3\nprint(1)\n", "python"),
        (
            "import os\n\n\ndef f(x):\n    return os.path.join(x, 'a')\n\n\nclass A:\n    pass\n",
            "python",
        ),
        ('package p\n\nimport "fmt"\n\nfunc F() {\n\tfmt.Println(1)\n}\n', "go"),
        (
            "export function f(a) {\n  return a + 1;\n}\n\nexport const g = (b) => {\n  return b;\n};\n",
            "javascript",
        ),
        (
            "use std::fmt;\n\npub struct A {\n    x: i32,\n}\n\nimpl A {\n    fn f(&self) -> i32 { 1 }\n}\n",
            "rust",
        ),
        ("a: 1\nb:\n  - 2\n  - 3\nc: {d: 4}\ne: f\n", ""),  # data parses as code too: no guess
        ("x = 1\ny = 2\n", ""),  # too short to tell
    ],
)
def test_language_from_content(text: str, lang: str) -> None:
    assert guess_language(text.splitlines()) == lang

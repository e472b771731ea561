"""Golden tests of the structural merge: marker styles, languages, context shapes, verdicts."""

from __future__ import annotations

import pytest

from edge_spec.apply.merge import MergeResult, detect_language, structural_merge
from edge_spec.apply.merge.anchors import LineIndex
from edge_spec.apply.merge.markers import classify_markers, marker_shape
from edge_spec.apply.merge.structure import Brackets
from edge_spec.apply.merge.syntax import parser_for

PY = '''import os
import sys

DEFAULT_TIMEOUT = 5


class Client:
    """A tiny HTTP client."""

    def __init__(self, base_url, timeout=DEFAULT_TIMEOUT):
        self.base_url = base_url
        self.timeout = timeout
        self.session = None

    def get(self, path):
        url = self.base_url + path
        return self._request("GET", url)

    def post(self, path, data):
        url = self.base_url + path
        return self._request("POST", url, data)

    def _request(self, method, url, data=None):
        if self.session is None:
            self.session = open_session()
        response = self.session.send(method, url, data, timeout=self.timeout)
        return response


def open_session():
    # rest of the config is loaded lazily
    return Session(os.environ.get("PROXY"))


def main(argv):
    client = Client(argv[1])
    print(client.get("/"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
'''

JS = """'use strict';

const express = require('express');
const { loadConfig } = require('./config');

const app = express();

function authenticate(req, res, next) {
  const token = req.headers['authorization'];
  if (!token) {
    return res.status(401).send('missing token');
  }
  next();
}

app.get('/health', (req, res) => {
  res.json({ ok: true });
});

app.get('/users/:id', authenticate, async (req, res) => {
  const user = await findUser(req.params.id);
  if (!user) {
    return res.status(404).end();
  }
  res.json(user);
});

function start(port) {
  const config = loadConfig();
  app.listen(port || config.port);
}

module.exports = { app, start };
"""

TS = """import { Logger } from './logger';

export interface Options {
  retries: number;
  timeout: number;
}

export class Fetcher {
  private logger: Logger;

  constructor(private readonly options: Options) {
    this.logger = new Logger('fetcher');
  }

  async fetch(url: string): Promise<string> {
    this.logger.debug(`fetching ${url}`);
    const response = await fetch(url);
    return response.text();
  }

  describe(): string {
    return `Fetcher(retries=${this.options.retries})`;
  }
}
"""

GO = """package cache

import (
\t"errors"
\t"sync"
)

var ErrMissing = errors.New("missing")

type Cache struct {
\tmu    sync.Mutex
\titems map[string]string
}

func New() *Cache {
\treturn &Cache{items: map[string]string{}}
}

func (c *Cache) Get(key string) (string, error) {
\tc.mu.Lock()
\tdefer c.mu.Unlock()
\tv, ok := c.items[key]
\tif !ok {
\t\treturn "", ErrMissing
\t}
\treturn v, nil
}

func (c *Cache) Put(key, value string) {
\tc.mu.Lock()
\tdefer c.mu.Unlock()
\tc.items[key] = value
}
"""

RUST = """use std::collections::HashMap;

pub struct Registry {
    names: HashMap<String, u32>,
    next: u32,
}

impl Registry {
    pub fn new() -> Self {
        Registry { names: HashMap::new(), next: 0 }
    }

    pub fn register(&mut self, name: &str) -> u32 {
        let id = self.next;
        self.names.insert(name.to_string(), id);
        self.next += 1;
        id
    }

    pub fn lookup(&self, name: &str) -> Option<u32> {
        self.names.get(name).copied()
    }
}
"""

JAVA = """package demo;

import java.util.ArrayList;
import java.util.List;

public class Inventory {
    private final List<String> items = new ArrayList<>();

    public void add(String item) {
        items.add(item);
    }

    public int count() {
        return items.size();
    }

    public boolean contains(String item) {
        return items.contains(item);
    }
}
"""


def merge(original: str, snippet: str, lang: str) -> MergeResult:
    return structural_merge(original, snippet, lang)


def assert_exact(original: str, snippet: str, expected: str, lang: str) -> MergeResult:
    result = merge(original, snippet, lang)
    assert result.text == expected
    assert result.exact, result.hunks
    return result


def assert_not_exact(original: str, snippet: str, lang: str) -> MergeResult:
    result = merge(original, snippet, lang)
    assert not result.exact, result.hunks
    return result


POST_LOGGED = PY.replace(
    '        return self._request("POST", url, data)',
    '        self.log("POST " + url)\n        return self._request("POST", url, data)',
)


@pytest.mark.parametrize(
    "marker",
    [
        "# ... existing code ...",
        "# ...",
        "# …",
        "…",
        "# ... rest of the code unchanged ...",
        "# rest of the file stays the same",
        "# existing code",
        "# ... previous code ...",
        "# [unchanged code]",
        "# ... (keep existing implementation)",
        "    # ...",
        "... existing code ...",
    ],
)
def test_python_marker_styles(marker: str) -> None:
    snippet = f"""{marker}
    def post(self, path, data):
        url = self.base_url + path
        self.log("POST " + url)
        return self._request("POST", url, data)
{marker}
"""
    assert_exact(PY, snippet, POST_LOGGED, "python")


@pytest.mark.parametrize(
    "marker",
    [
        "// ... existing code ...",
        "// ...",
        "/* ... */",
        "/* unchanged */",
        "// existing code",
        "// ... rest of the code unchanged ...",
        "// [unchanged code]",
        "{/* ... */}",
        "// ... (keep existing implementation)",
        "  // ... other routes ...",
    ],
)
def test_javascript_marker_styles(marker: str) -> None:
    snippet = f"""{marker}
app.get('/health', (req, res) => {{
  res.json({{ ok: true, uptime: process.uptime() }});
}});
{marker}
"""
    expected = JS.replace(
        "res.json({ ok: true });", "res.json({ ok: true, uptime: process.uptime() });"
    )
    assert_exact(JS, snippet, expected, "javascript")


@pytest.mark.parametrize(
    ("line", "shape"),
    [
        ("# ... existing code ...", True),
        ("-- ...", True),
        ("; ...", True),
        ("% ...", True),
        ("<!-- ... -->", True),
        ("/* ... */", True),
        ("// … handlers …", True),
        ("# keep the cache warm", False),
        ("# same as above", False),
        ("// other cases", False),
        ("# rest of the config is loaded lazily", False),
        ("// TODO: retry...", False),
        ("...args", False),
        ("#include <stdio.h>", False),
        ("#[derive(Debug)]", False),
        ("x = 1  # ...", False),
    ],
)
def test_marker_shapes(line: str, shape: bool) -> None:
    assert marker_shape(line) is shape


def test_comment_that_looks_like_a_marker_but_is_in_the_original_is_code() -> None:
    snippet = """def open_session():
    # rest of the config is loaded lazily
    log.debug("opening a session")
    return Session(os.environ.get("PROXY"))
"""
    expected = PY.replace(
        '    return Session(os.environ.get("PROXY"))',
        '    log.debug("opening a session")\n    return Session(os.environ.get("PROXY"))',
    )
    assert_exact(PY, snippet, expected, "python")
    flags = classify_markers(
        ["# ... existing code ...", "    # rest of the file stays the same"],
        LineIndex(PY.splitlines()),
        "python",
    )
    assert flags == [True, True]


def test_python_ellipsis_bodies_are_code() -> None:
    original = (
        "class Proto(Protocol):\n    def size(self) -> int:\n        ...\n\n"
        "    def name(self) -> str:\n        ...\n"
    )
    snippet = (
        "# ...\n    def size(self) -> int:\n        ...\n\n    def name(self) -> bytes:\n"
        "        ...\n"
    )
    assert_exact(original, snippet, original.replace("-> str", "-> bytes"), "python")
    stub = "# ...\n\ndef helper() -> None:\n    ...\n"
    result = merge("import os\n\n\ndef main():\n    pass\n", stub, "python")
    assert result.text.endswith("def helper() -> None:\n    ...\n")


def test_unmarked_start_with_few_lines_above_is_ambiguous() -> None:
    original = "import os\n\nA = 1\nB = 2\nC = 3\nD = 4\n"
    result = assert_not_exact(original, "A = 1\nB = 20\nC = 3\n", "python")
    assert "unmarked start" in result.hunks[0].reason
    assert result.text == original.replace("B = 2", "B = 20")


def test_trimmed_context_single_anchor_and_changed_edge_lines() -> None:
    snippet = """# ...
    def post(self, path, data, headers=None):
        url = self.base_url + path
# ...
"""
    expected = PY.replace(
        "def post(self, path, data):", "def post(self, path, data, headers=None):"
    )
    assert_exact(PY, snippet, expected, "python")
    keyed = "# ...\nDEFAULT_TIMEOUT = 30\n# ...\n"  # no context at all, but the same key
    assert_exact(PY, keyed, PY.replace("DEFAULT_TIMEOUT = 5", "DEFAULT_TIMEOUT = 30"), "python")


def test_trimmed_context_that_cannot_be_placed_for_sure() -> None:
    result = assert_not_exact(PY, "# ...\n        self.retries = 3\n# ...\n", "python")
    assert result.hunks[0].status == "unplaced"
    result = assert_not_exact(
        PY,
        "# ...\n        self.session = None\n        self.retries = 3\n"
        "        print('ready')\n# ...\n",
        "python",
    )
    assert result.hunks[0].status == "ambiguous"


def test_pure_insertion_between_anchors_and_after_one() -> None:
    snippet = """# ...
import sys
import json

DEFAULT_TIMEOUT = 5
# ...
"""
    assert_exact(PY, snippet, PY.replace("import sys\n", "import sys\nimport json\n"), "python")
    new_method = """# ...
        return response

    def close(self):
        self.session = None


def open_session():
# ...
"""
    expected = PY.replace(
        "        return response\n",
        "        return response\n\n    def close(self):\n        self.session = None\n",
    )
    assert_exact(PY, new_method, expected, "python")


def test_whole_function_replaced_by_name_without_markers() -> None:
    snippet = """def main(argv):
    client = Client(argv[1], timeout=30)
    print(client.get("/health"))
    return 0
"""
    start, end = PY.index("def main"), PY.index("\n\n\nif __name__")
    expected = PY[:start] + snippet.rstrip("\n") + PY[end:]
    snippet += "# ...\n"  # without it, the two lines below might be meant deleted
    result = assert_exact(PY, snippet, expected, "python")
    assert result.hunks[0].reason == "whole definition replaced by name"
    js = """function start(port) {
  const config = loadConfig({ strict: true });
  const server = app.listen(port || config.port);
  return server;
}
"""
    start, end = JS.index("function start"), JS.index("\n\nmodule.exports")
    assert_exact(
        JS, "// ...\n" + js + "// ...\n", JS[:start] + js.rstrip("\n") + JS[end:], "javascript"
    )
    # In Python a snippet that just stops also parses as a whole function: with its last line
    # changed, "whole" and "stops early" read alike, so it is not sure.
    rewrite = "def open_session():\n    return Session(None)\n"
    assert_not_exact(PY, rewrite, "python")


def test_whole_method_replaced_by_name_in_java_and_rust() -> None:
    snippet = """    public int count() {
        int n = items.size();
        return n;
    }
"""
    expected = JAVA.replace(
        "        return items.size();\n", "        int n = items.size();\n        return n;\n"
    )
    assert_exact(JAVA, snippet, expected, "java")
    rust = """    pub fn lookup(&self, name: &str) -> Option<u32> {
        let key = name.trim();
        self.names.get(key).copied()
    }
"""
    expected = RUST.replace(
        "        self.names.get(name).copied()\n",
        "        let key = name.trim();\n        self.names.get(key).copied()\n",
    )
    assert_exact(RUST, rust, expected, "rust")


def test_a_function_assigned_to_a_name_is_replaced_by_that_name() -> None:
    # Lua and older JS define their API by assignment; a rename inside such a function changes
    # most of its lines, so only its name places it.
    lua = """local M = {}

M.setup = function(opts)
  M.opts = opts
end

M.add_to_env = function()
  local env = getfenv(2)
  env.a = M
  env.a.it = M.it
  setfenv(2, env)
end

return M
"""
    snippet = """-- ... existing code ...
M.add_to_env = function()
  local fenv = getfenv(2)
  fenv.a = M
  fenv.a.it = M.it
  setfenv(2, fenv)
end
-- ... existing code ...
"""
    start, end = lua.index("M.add_to_env"), lua.index("\n\nreturn M")
    expected = lua[:start] + snippet.split("\n", 1)[1].rsplit("end\n", 1)[0] + "end" + lua[end:]
    result = assert_exact(lua, snippet, expected, "lua")
    assert result.hunks[0].reason == "whole definition replaced by name"
    js = """Router.prototype.route = function route(path) {
  var r = new Route(path);
  this.stack.push(r);
  return r;
};
"""
    original = (
        "var Router = module.exports = {};\n\n"
        + js
        + "\nRouter.prototype.use = function use(fn) {\n  this.stack.push(fn);\n};\n"
    )
    renamed = (
        js.replace("var r", "var found")
        .replace("push(r)", "push(found)")
        .replace("return r;", "return found;")
    )
    assert_exact(
        original, "// ...\n" + renamed + "// ...\n", original.replace(js, renamed), "javascript"
    )


def test_a_new_function_after_a_repeated_last_line_is_sure() -> None:
    # `assert result == expect` ends two tests; reading the snippet's copy at the first one
    # deletes a whole test the snippet never names, which a lazy snippet does not do.
    original = """import os


def test_one(tmp):
    result = run(tmp, 1)
    assert result == expect


def test_two(tmp):
    result = run(tmp, 2)
    assert result.code == 0
    assert result == expect


def _helper():
    return os.sep
"""
    new = """def test_three(tmp):
    result = run(tmp, 3)
    assert result.code == 1
"""
    snippet = (
        "# ... existing code ...\n    assert result == expect\n\n\n" + new + "\n\ndef _helper():\n"
        "# ... existing code ...\n"
    )
    expected = original.replace("\n\n\ndef _helper", "\n\n\n" + new + "\n\ndef _helper")
    assert_exact(original, snippet, expected, "python")
    # Naming test_two other than in a call makes its deletion a reading again.
    named = snippet.replace("result.code == 1", "result.code == 1  # replaces test_two")
    assert_not_exact(original, named, "python")
    called = snippet.replace("run(tmp, 3)", "test_two(tmp)")
    assert_exact(original, called, expected.replace("run(tmp, 3)", "test_two(tmp)"), "python")


def test_marker_inside_a_block() -> None:
    snippet = """func (c *Cache) Get(key string) (string, error) {
\t// ... existing code ...
\treturn v, nil
}

func (c *Cache) Delete(key string) {
\tc.mu.Lock()
\tdefer c.mu.Unlock()
\tdelete(c.items, key)
}
"""
    expected = GO.replace(
        "\treturn v, nil\n}\n",
        "\treturn v, nil\n}\n\nfunc (c *Cache) Delete("
        "key string) {\n\tc.mu.Lock()\n\tdefer c.mu.Unlock()\n"
        "\tdelete(c.items, key)\n}\n",
        1,
    )
    assert_exact(GO, snippet, expected, "go")
    closer = """// ...
function start(port) {
  // ... existing code ...
  app.listen(port || config.port);
  console.log('listening');
}
// ...
"""
    expected_js = JS.replace(
        "  app.listen(port || config.port);\n",
        "  app.listen(port || config.port);\n  console.log('listening');\n",
    )
    assert_exact(JS, closer, expected_js, "javascript")
    # The block's last statement changed with no context before it: replace or append?
    unsure = closer.replace(
        "  app.listen(port || config.port);\n  console.log('listening');\n",
        "  app.listen(port || config.port, () => console.log('up'));\n",
    )
    assert_not_exact(JS, unsure, "javascript")
    # In Python the block ends where the indentation does; `return` pairs with `return`.
    block = (
        "    def post(self, path, data):\n        # ...\n        return None\n\n"
        "    def _request(self, method, url, data=None):\n"
    )
    assert_exact(
        PY,
        block,
        PY.replace('        return self._request("POST", url, data)', "        return None"),
        "python",
    )


def test_go_tabs_and_new_function() -> None:
    snippet = """// ... existing code ...
func (c *Cache) Put(key, value string) {
\tc.mu.Lock()
\tdefer c.mu.Unlock()
\tif value == "" {
\t\tdelete(c.items, key)
\t\treturn
\t}
\tc.items[key] = value
}
"""
    expected = GO.replace(
        "\tdefer c.mu.Unlock()\n\tc.items[key] = value\n",
        '\tdefer c.mu.Unlock()\n\tif value == "" {\n\t\tdelete(c.items, key)\n'
        "\t\treturn\n\t}\n\tc.items[key] = value\n",
    )
    assert_exact(GO, snippet, expected, "go")
    spaced = snippet.replace("\t", "    ")  # the model wrote spaces: the file keeps its tabs
    assert_exact(GO, spaced, expected, "go")


def test_crlf_original_keeps_its_line_endings() -> None:
    original = JS.replace("\n", "\r\n")
    snippet = (
        "// ...\nfunction start(port) {\n  const config = loadConfig(port);\n"
        "  app.listen(port || config.port);\n}\n// ...\n"
    )
    expected = original.replace("loadConfig();", "loadConfig(port);")
    assert_exact(original, snippet, expected, "javascript")
    assert_exact(
        JS, snippet.replace("\n", "\r\n"), JS.replace("loadConfig();", "loadConfig(port);"), "js"
    )


def test_only_anchor_repeated_is_not_exact() -> None:
    original = (
        "def a(x):\n    y = x + 1\n    return x\n\n\ndef b(x):\n    y = x * 2\n    return x\n"
    )
    result = assert_not_exact(original, "# ...\n    log(y)\n    return x\n# ...\n", "python")
    assert result.hunks[0].status in ("ambiguous", "unplaced")
    assert "place" in result.hunks[0].reason or "weak" in result.hunks[0].reason


def test_hunk_that_matches_nothing_is_unplaced() -> None:
    result = assert_not_exact(PY, "# ...\nzzz_unknown()\n# ...\n", "python")
    assert result.hunks[0].status == "unplaced"
    assert result.hunks[0].original_span is None


def test_merge_that_breaks_the_parse_is_downgraded() -> None:
    if parser_for("javascript") is None:
        pytest.skip("tree-sitter-javascript not installed")
    snippet = (
        "// ...\nfunction start(port) {\n  const config = = loadConfig();\n"
        "  app.listen(port || config.port);\n}\n// ...\n"
    )
    result = assert_not_exact(JS, snippet, "javascript")
    assert "syntax error" in result.hunks[0].reason
    unbalanced = snippet.replace("= = loadConfig();", "loadConfig(;")
    assert "balance" in assert_not_exact(JS, unbalanced, "javascript").hunks[0].reason


def test_duplicate_definition_is_downgraded() -> None:
    if parser_for("python") is None:
        pytest.skip("tree-sitter-python not installed")
    snippet = (
        "# ...\n    def get(self, path):\n        url = self.base_url + path\n"
        '        return self._request("GET", url)\n\n    def get(self, path):\n'
        "        return None\n\n    def post(self, path, data):\n# ...\n"
    )
    result = assert_not_exact(PY, snippet, "python")
    assert any("twice" in h.reason for h in result.hunks)


def test_language_detection() -> None:
    assert detect_language("", "src/app.tsx") == "tsx"
    assert detect_language("PY") == "python"
    assert detect_language("", "main.go") == "go"
    assert detect_language("", "Makefile") == ""


def test_edge_cases() -> None:
    assert not merge(PY, "# ... existing code ...\n", "python").exact
    assert merge(PY, "", "python").text == PY
    empty = merge("", "print('hi')\n", "python")
    assert empty.text == "print('hi')\n" and empty.exact
    spans = merge(PY, "# ...\nDEFAULT_TIMEOUT = 7\n# ...\n", "python").hunks[0]
    assert spans.snippet_span == (2, 2) and spans.original_span == (3, 4)


@pytest.mark.parametrize(
    "language", ["python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp"]
)
def test_grammars_load_offline(language: str) -> None:
    parser = parser_for(language)
    if parser is None:
        pytest.skip(f"the {language} grammar wheel is not installed")
    assert parser.parse(b"x\n") is not None


C_SRC = """#include <stdio.h>

static int add(int a, int b) {
    return a + b;
}

int main(void) {
    printf("%d\\n", add(1, 2));
    return 0;
}
"""


def test_c_and_cpp() -> None:
    snippet = (
        "// ...\nstatic int add(int a, int b) {\n    int sum = a + b;\n    return sum;\n}\n// ...\n"
    )
    expected = C_SRC.replace("    return a + b;\n", "    int sum = a + b;\n    return sum;\n")
    assert_exact(C_SRC, snippet, expected, "c")
    assert_exact(C_SRC, snippet, expected, "cpp")


def test_blank_lines_between_two_markers_are_not_sure() -> None:
    result = assert_not_exact(PY, "# ...\nDEFAULT_TIMEOUT = 7\n# ...\n\n# ...\n", "python")
    assert result.hunks[-1].status == "unplaced"
    assert result.text == PY.replace("DEFAULT_TIMEOUT = 5", "DEFAULT_TIMEOUT = 7")


def test_unplaced_hunk_that_ends_the_snippet_goes_last() -> None:
    result = merge(PY, "# ...\n\n\ndef brand_new_helper():\n    return 42\n", "python")
    assert result.hunks[0].status == "unplaced"
    assert result.text.startswith(PY) and result.text.endswith("    return 42\n")


def test_guessed_indentation_unit_is_not_sure() -> None:
    # Indented only by 8: one level of 8 or two of 4? No context line shows how a tab maps.
    original = "[compute_total]\n        subtotal = 1\n[report_total]\n"
    snippet = "[compute_total]\n\tsubtotal = 2\n[report_total]\n"
    result = assert_not_exact(original, snippet, "")
    assert "guessed" in result.hunks[0].reason
    assert result.text == "[compute_total]\n        subtotal = 2\n[report_total]\n"


def test_a_tab_after_spaces_is_the_edits_own_indentation() -> None:
    # Continuation lines indented "4 spaces + tab" in a file of spaces: no editor converting
    # indentation writes that, so the commit's whitespace goes in as given, and surely.
    original = (
        "class Logger\n{\npublic:\n    Logger(const std::string& name, size_t size);\n"
        "\nprotected:\n    void log();\n};\n"
    )
    snippet = (
        "// ... existing code ...\npublic:\n    Logger(const std::string& name,\n"
        "    \tsize_t size,\n    \tbool flush = false);\n\nprotected:\n    void log();\n"
        "// ... existing code ...\n"
    )
    result = structural_merge(original, snippet, "cpp", "logger.h")
    assert result.exact, result.hunks
    assert "    \tbool flush = false);\n" in result.text


def test_imports_shown_as_a_block_replace_the_block() -> None:
    original = "use std::env;\nuse std::fs;\nuse std::str;\n\nfn main() {\n    env::args();\n}\n"
    snippet = "use std::{env, fs, str};\n\n// ... existing code ...\n"
    expected = "use std::{env, fs, str};\n\nfn main() {\n    env::args();\n}\n"
    for path in ("main.rs", None):
        result = structural_merge(original, snippet, path=path)
        assert result.exact and result.text == expected, result.hunks


@pytest.mark.parametrize(
    ("lang", "line", "profile"),
    [
        ("php", " * @deprecated Use $c->set('a', array('u', 'p');", (0, 0)),
        ("java", "/** see foo( */ bar(", (1, 0)),
        ("typescript", "   */", (0, 0)),
        ("c", "int *p = f(x);", (0, 0)),
        ("go", "x := a *", (0, 0)),
        ("rust", "/* open ( ", (0, 0)),
        ("python", " * (a", (1, 0)),
    ],
)
def test_brackets_in_block_comments_are_prose(lang: str, line: str, profile: tuple) -> None:
    assert Brackets(lang).line(line) == profile


def test_body_stopping_after_new_lines_is_not_read_whole() -> None:
    original = """def f(a, b):
    x = compute(a)
    y = compute(b)
    for i in range(b):
        total += i


def g():
    return 1
"""
    # A diff's part may stop right after what it inserts: the loop is not shown, not deleted.
    snippet = "def f(a, b):\n    x = compute(a)\n    y = compute(b)\n    log(x)\n"
    assert not structural_merge(original, snippet, "python").exact

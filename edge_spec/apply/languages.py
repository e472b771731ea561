"""The one language table: file extension -> language, code fence tag, grammar, comment syntax.

Prompts take their fence tag from it, the merge its grammar and member wrapper, snippet writers
(bench, task miners, the messy generator) the marker line a language's snippets carry. A new
language is one row here plus its grammar wheel in `pyproject.toml`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

_C_BLOCK = (("/*", "*/"),)


@dataclass(frozen=True)
class Language:
    """One language: `extensions` map to their fence tag; `grammar` is (module, function) of a
    tree-sitter grammar wheel, and `fragment` the grammar a snippet hunk parses with when it
    differs (PHP files open with `<?php`, hunks do not); `member_wrap` lets class members parse
    on their own; `line_comment` and `block_comment` are the comment syntax a marker uses."""

    name: str
    extensions: dict[str, str]
    grammar: tuple[str, str] | None = None
    fragment: tuple[str, str] | None = None
    member_wrap: tuple[str, str] | None = None
    line_comment: tuple[str, ...] = ("//",)
    block_comment: tuple[tuple[str, str], ...] = _C_BLOCK
    aliases: tuple[str, ...] = ()
    # How the bracket counter blanks strings and line comments: "python" (`#`, quotes), "js"
    # (`//`, quotes, backticks), "go" (`//`, char literals, raw strings), "c" (`//`, char
    # literals), "" (quotes only).
    lexer: str = ""

    @property
    def fence(self) -> str:
        """The fence tag of the language's first extension."""
        return next(iter(self.extensions.values()))

    def marker(self, words: str = "... existing code ...") -> str:
        """A marker line in this language's comment syntax (`# ... existing code ...`)."""
        if self.line_comment:
            return f"{self.line_comment[0]} {words}"
        opener, closer = self.block_comment[0]
        return f"{opener} {words} {closer}"


def _ts(name: str, fn: str = "language") -> tuple[str, str]:
    return (f"tree_sitter_{name}", fn)


_BRACED = ("class W__ {\n", "\n}\n")

LANGUAGES: tuple[Language, ...] = (
    Language(
        "python",
        {".py": "python", ".pyi": "python", ".pyw": "python"},
        _ts("python"),
        line_comment=("#",),
        block_comment=(),
        aliases=("py", "python3"),
        lexer="python",
    ),
    Language(
        "javascript",
        {".js": "javascript", ".jsx": "jsx", ".mjs": "javascript", ".cjs": "javascript"},
        _ts("javascript"),
        member_wrap=_BRACED,
        aliases=("js", "jsx", "node", "nodejs"),
        lexer="js",
    ),
    Language(
        "typescript",
        {".ts": "typescript", ".mts": "typescript", ".cts": "typescript"},
        _ts("typescript", "language_typescript"),
        member_wrap=_BRACED,
        aliases=("ts",),
        lexer="js",
    ),
    Language(
        "tsx", {".tsx": "tsx"}, _ts("typescript", "language_tsx"), member_wrap=_BRACED, lexer="js"
    ),
    Language("go", {".go": "go"}, _ts("go"), aliases=("golang",), lexer="go"),
    Language(
        "rust",
        {".rs": "rust"},
        _ts("rust"),
        member_wrap=("impl W__ {\n", "\n}\n"),
        aliases=("rs",),
        lexer="c",
    ),
    Language("java", {".java": "java"}, _ts("java"), member_wrap=_BRACED, lexer="c"),
    Language("c", {".c": "c", ".h": "c"}, _ts("c"), aliases=("h",), lexer="c"),
    Language(
        "cpp",
        {
            ".cpp": "cpp",
            ".cc": "cpp",
            ".cxx": "cpp",
            ".hpp": "cpp",
            ".hh": "cpp",
            ".hxx": "cpp",
            ".ipp": "cpp",
        },
        _ts("cpp"),
        member_wrap=("struct W__ {\n", "\n};\n"),
        aliases=("c++", "cc", "cxx"),
        lexer="c",
    ),
    Language(
        "csharp",
        {".cs": "csharp"},
        _ts("c_sharp"),
        member_wrap=_BRACED,
        aliases=("c#", "cs", "c-sharp"),
        lexer="c",
    ),
    Language(
        "kotlin",
        {".kt": "kotlin", ".kts": "kotlin"},
        _ts("kotlin"),
        member_wrap=_BRACED,
        aliases=("kt",),
        lexer="c",
    ),
    Language("swift", {".swift": "swift"}, _ts("swift"), member_wrap=_BRACED, lexer="c"),
    Language(
        "scala", {".scala": "scala", ".sc": "scala"}, _ts("scala"), member_wrap=_BRACED, lexer="c"
    ),
    Language(
        "php",
        {".php": "php"},
        _ts("php", "language_php"),
        fragment=_ts("php", "language_php_only"),
        member_wrap=_BRACED,
        line_comment=("//", "#"),
        lexer="js",
    ),
    Language(
        "ruby",
        {".rb": "ruby", ".rake": "ruby", ".gemspec": "ruby"},
        _ts("ruby"),
        member_wrap=("class W__\n", "\nend\n"),
        line_comment=("#",),
        block_comment=(("=begin", "=end"),),
        aliases=("rb",),
    ),
    Language(
        "lua", {".lua": "lua"}, _ts("lua"), line_comment=("--",), block_comment=(("--[[", "]]"),)
    ),
    Language(
        "bash",
        {".sh": "bash", ".bash": "bash", ".zsh": "bash"},
        _ts("bash"),
        line_comment=("#",),
        block_comment=(),
        aliases=("sh", "shell", "zsh"),
    ),
    Language("sql", {".sql": "sql"}, _ts("sql"), line_comment=("--",)),
    Language(
        "yaml",
        {".yaml": "yaml", ".yml": "yaml"},
        _ts("yaml"),
        line_comment=("#",),
        block_comment=(),
        aliases=("yml",),
    ),
    Language("toml", {".toml": "toml"}, _ts("toml"), line_comment=("#",), block_comment=()),
    # JSON has no comments; snippets still mark elided parts with `//` lines.
    Language("json", {".json": "json", ".jsonc": "json"}, _ts("json"), block_comment=()),
    Language(
        "html",
        {".html": "html", ".htm": "html", ".xml": "xml", ".svg": "xml", ".vue": "vue"},
        _ts("html"),
        line_comment=(),
        block_comment=(("<!--", "-->"),),
    ),
    Language("css", {".css": "css", ".scss": "scss", ".less": "less"}, _ts("css"), line_comment=()),
    Language(
        "markdown",
        {".md": "markdown", ".markdown": "markdown"},
        _ts("markdown"),
        line_comment=(),
        block_comment=(("<!--", "-->"),),
        aliases=("md",),
    ),
)

_BY_NAME = {lang.name: lang for lang in LANGUAGES}
_BY_ALIAS = {**{a: lang for lang in LANGUAGES for a in lang.aliases}, **_BY_NAME}
_BY_EXTENSION = {ext: lang for lang in LANGUAGES for ext in lang.extensions}


def language(name: str) -> Language | None:
    """The row for a language name or alias (any case), or None."""
    return _BY_ALIAS.get(name.strip().lower())


def of_path(path: str | None) -> Language | None:
    """The row for a path's extension, or None (no path, `-`, an unknown extension)."""
    return _BY_EXTENSION.get(PurePath(path).suffix.lower()) if path and path != "-" else None


def canonical(name: str = "", path: str | None = None) -> str:
    """The language name from an explicit `name` (an unknown one is kept), else from the
    path's extension; "" when neither says."""
    if name.strip():
        row = language(name)
        return row.name if row else name.strip().lower()
    row = of_path(path)
    return row.name if row else ""


def fence_tag(path: str | None, name: str = "") -> str:
    """The code fence tag for a file (`.jsx` -> `jsx`), or "" when unknown."""
    ext = PurePath(path).suffix.lower() if path and path != "-" else ""
    row = _BY_EXTENSION.get(ext)
    if row is not None:
        return row.extensions[ext]
    row = language(name) if name else None
    return row.fence if row else ""


def marker_line(name: str, words: str = "... existing code ...") -> str:
    """The marker line a snippet in language `name` carries (`//` style when unknown)."""
    row = language(name)
    return row.marker(words) if row else f"// {words}"

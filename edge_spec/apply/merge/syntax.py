"""Syntax trees for the merge (tree-sitter with per-language grammar wheels), when available.

Three uses: the named definitions of a file (functions, methods, classes and their kin, at top
level and as class members) so a whole definition in a snippet replaces the one of the same name;
the definitions a snippet hunk consists of; and a parse check of the merged file. Every function
degrades to "no information" (None or empty) when tree-sitter or the language's grammar is not
installed, and the line matcher then works alone.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from edge_spec.apply.languages import language as lookup
from edge_spec.apply.merge.structure import Brackets, balanced_core

_FUNCTIONS = frozenset(
    """function_definition function_declaration generator_function_declaration
method_definition method_declaration constructor_declaration function_item method singleton_method
secondary_constructor init_declaration deinit_declaration local_function_declaration
destructor_declaration operator_declaration property_declaration_with_body""".split()
)
_CLASSES = frozenset(
    """class_definition class_declaration abstract_class_declaration
interface_declaration enum_declaration type_alias_declaration struct_item enum_item trait_item
impl_item mod_item type_declaration record_declaration struct_specifier class_specifier
namespace_definition internal_module module class object_declaration object_definition
trait_definition protocol_declaration struct_declaration namespace_declaration
trait_declaration singleton_class""".split()
)
_BODIES = frozenset(
    """block class_body interface_body enum_body declaration_list
field_declaration_list statement_block enum_body_declarations body_statement template_body
protocol_body enum_class_body""".split()
)
_VALUES = frozenset("arrow_function function_expression function class class_expression".split())
# Conditional compilation around code (a C header guard, a C# file under `#if FEATURE`) does not
# change what it defines: its definitions belong to the enclosing scope.
_CONDITIONALS = frozenset(
    "preproc_if preproc_ifdef preproc_elif preproc_elifdef preproc_else".split()
)


@dataclass(frozen=True)
class Definition:
    """A named definition: lines [start, end] inclusive; `head` is its keyword line."""

    kind: str  # "function" or "class"
    name: str
    start: int
    head: int
    end: int
    parent: str
    complete: bool = True


def parser_for(language: str, fragment: bool = False) -> Any | None:
    """A tree-sitter parser for the language (for a snippet hunk with `fragment`), or None
    without tree-sitter or its grammar."""
    row = lookup(language)
    if row is None or row.grammar is None:
        return None
    return _parser(row.fragment or row.grammar if fragment else row.grammar)


@functools.cache
def _parser(spec: tuple[str, str]) -> Any | None:
    try:  # optional extras: the merge works on lines alone without them
        ts = importlib.import_module("tree_sitter")
        grammar = getattr(importlib.import_module(spec[0]), spec[1])()
        return ts.Parser(ts.Language(grammar))
    except (ImportError, AttributeError, ValueError, TypeError):
        return None


def parse(language: str, data: bytes, fragment: bool = False) -> Any | None:
    parser = parser_for(language, fragment)
    return None if parser is None else parser.parse(data)


def encode_lines(lines: Sequence[str]) -> bytes:
    """Lines as the parser sees them: LF line ends, one after every line."""
    return "".join(ln + "\n" for ln in lines).encode("utf-8", "surrogatepass")


def reparse(
    language: str, tree: Any, old: Sequence[str], spans: Sequence[tuple[int, int, Sequence[str]]]
) -> Any | None:
    """Parse the edited file incrementally: `spans` replace old lines [start, end) by new lines.

    `tree` must come from `parse(language, encode_lines(old))`; it is edited in place. Spans are
    applied last first, so the offsets of the ones before stay those of the original.
    """
    parser = parser_for(language)
    if parser is None or tree is None:
        return None
    offsets = [0]
    for ln in old:
        offsets.append(offsets[-1] + len((ln + "\n").encode("utf-8", "surrogatepass")))
    new: list[str] = []
    pos = 0
    for start, end, lines in spans:
        new += old[pos:start]
        new += lines
        pos = max(pos, end)
    new += old[pos:]
    for start, end, lines in sorted(spans, key=lambda t: t[0], reverse=True):
        size = len(encode_lines(lines))
        tree.edit(
            start_byte=offsets[start],
            old_end_byte=offsets[end],
            new_end_byte=offsets[start] + size,
            start_point=(start, 0),
            old_end_point=(end, 0),
            new_end_point=(start + len(lines), 0),
        )
    return parser.parse(encode_lines(new), tree)


def _text(node: Any) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _name(node: Any) -> str | None:
    if node.type == "impl_item":
        typ, trait = node.child_by_field_name("type"), node.child_by_field_name("trait")
        return None if typ is None else _text(typ) + (f" for {_text(trait)}" if trait else "")
    if node.type == "type_declaration":
        spec = next((c for c in node.named_children if c.type in ("type_spec", "type_alias")), None)
        return None if spec is None else _name(spec)
    if node.type == "assignment_expression":
        return _text(node.child_by_field_name("left"))
    if node.type == "assignment_statement":
        return _text(node.named_children[0])
    named = node.child_by_field_name("name")
    if named is None:
        decl = node.child_by_field_name("declarator")
        while decl is not None and decl.child_by_field_name("declarator") is not None:
            decl = decl.child_by_field_name("declarator")
        named = decl
    if named is None:
        return None
    name = _text(named)
    receiver = node.child_by_field_name("receiver") if node.type == "method_declaration" else None
    if receiver is not None:
        idents = [w for w in _text(receiver).replace("*", " ").strip("()").split() if w]
        name = f"{idents[-1]}.{name}" if idents else name
    return name


def _unwrap(node: Any) -> tuple[Any, str] | None:
    """The definition a top-level or member node stands for, and its kind."""
    inner = node
    if node.type in ("decorated_definition", "export_statement", "template_declaration"):
        inner = (
            node.child_by_field_name("definition")
            or node.child_by_field_name("declaration")
            or next((c for c in node.named_children if c.type in _FUNCTIONS | _CLASSES), None)
        )
        if inner is None:
            return None
        found = _unwrap(inner)
        return None if found is None else found
    if inner.type == "variable_declaration" and inner.named_child_count == 1:
        inner = inner.named_children[0]  # Lua: `local f = function ... end`
    if inner.type == "expression_statement" and inner.named_child_count == 1:
        inner = inner.named_children[0]  # an unclosed JS function parses as an expression
        if inner.type == "assignment_expression":
            return _assigned(inner)
        if (
            inner.type not in ("function_expression", "class")
            or inner.child_by_field_name("name") is None
        ):
            return None
        return inner, "function" if inner.type == "function_expression" else "class"
    if inner.type in _FUNCTIONS:
        return inner, "function"
    if inner.type in _CLASSES:
        return inner, "class"
    if inner.type == "assignment_statement":
        return _assigned(inner)
    if inner.type in ("lexical_declaration", "variable_declaration"):
        decls = [c for c in inner.named_children if c.type == "variable_declarator"]
        value = decls[0].child_by_field_name("value") if len(decls) == 1 else None
        if value is not None and value.type in _VALUES:
            return decls[0], "function"
    return None


def _assigned(node: Any) -> tuple[Any, str] | None:
    """A function assigned to a name (`exports.send = function ...` in JS, `M.run = function
    ... end` in Lua): a definition by that name, the way such code defines its API."""
    if node.type == "assignment_expression":
        value = node.child_by_field_name("right")
    else:
        sides = [c.named_children for c in node.named_children]
        value = sides[1][0] if len(sides) == 2 and all(len(x) == 1 for x in sides) else None
    if value is None or value.type not in _VALUES | {"function_definition"}:
        return None
    return node, "class" if value.type.startswith("class") else "function"


def _body(node: Any) -> Any | None:
    body = node.child_by_field_name("body")
    if body is None:
        body = next((c for c in node.named_children if c.type in _BODIES), None)
    return body if body is not None and body.type in _BODIES else None


def definitions_of(
    root: Any, offset: int = 0, parent: str = "", depth: int = 0
) -> list[Definition]:
    """Named definitions among the children of `root`, and class members, recursively."""
    out: list[Definition] = []
    for child in root.named_children:
        if child.type in _CONDITIONALS:
            out += definitions_of(child, offset, parent, depth)
            continue
        found = _unwrap(child)
        if found is None:
            continue
        node, kind = found
        name = _name(node)
        if not name:
            continue
        out.append(
            Definition(
                kind,
                name,
                child.start_point[0] - offset,
                node.start_point[0] - offset,
                child.end_point[0] - offset,
                parent,
                not child.has_error,
            )
        )
        body = _body(node) if kind == "class" and depth < 3 else None
        if body is not None:
            out += definitions_of(body, offset, name, depth + 1)
    return out


def definitions(language: str, tree: Any | None) -> list[Definition]:
    return [] if tree is None else definitions_of(tree.root_node)


def doubled_definition(
    before: Sequence[Definition],
    before_lines: Sequence[str],
    after: Sequence[Definition],
    after_lines: Sequence[str],
) -> tuple[str, int] | None:
    """The name and count of a definition the edited file has more often than the original, by
    kind, scope, name and opening line: code moved with its old copy kept. An added overload
    opens with other parameters, so it is not one."""

    def key(d: Definition, lines: Sequence[str]) -> tuple[str, str, str, str]:
        # Through the line that names it: a grammar may open a definition at its attributes
        # (`@available(...)`), which overloads share.
        last = d.head
        while last < min(d.end, d.head + 8, len(lines) - 1) and d.name not in lines[last]:
            last += 1
        head = " ".join(" ".join(lines[d.head : last + 1]).split())
        return d.kind, d.parent, d.name, head

    had = Counter(key(d, before_lines) for d in before)
    has = Counter(key(d, after_lines) for d in after)
    return next(((k[2], n) for k, n in has.items() if n > 1 and n > had[k]), None)


def dropped_definition(
    before: Sequence[Definition], after: Sequence[Definition], named: str
) -> Definition | None:
    """The first definition of the original that the edited file no longer has by any kind
    and scope, and whose name the text `named` (the snippet) never writes: deleted or renamed
    without the snippet saying so."""
    have = {d.name for d in after}
    return next(
        (d for d in before if d.name not in have and not _writes(named, d.name)),
        None,
    )


def loses_definitions(
    before: Sequence[Definition], after: Sequence[Definition], named: str
) -> bool:
    """Whether the edited file has lost, of some kind, more definitions the text `named` never
    writes than it gained under new names: code deleted without a word, not renamed (a rename
    the snippet shows brings its new name)."""
    had = {(d.kind, d.name) for d in before}
    have = {(d.kind, d.name) for d in after}
    gone = Counter(
        d.kind for d in before if (d.kind, d.name) not in have and not _writes(named, d.name)
    )
    new = Counter(d.kind for d in after if (d.kind, d.name) not in had)
    return any(n > new[kind] for kind, n in gone.items())


def _writes(text: str, name: str) -> bool:
    """Whether `text` has `name` as a whole word."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


def error_line(tree: Any | None) -> int | None:
    """The first line with a syntax error, or None (also without a tree)."""
    if tree is None or not tree.root_node.has_error:
        return None
    node = tree.root_node
    while True:
        if node.is_error or node.is_missing:
            return int(node.start_point[0])
        bad = next((c for c in node.children if c.has_error or c.is_error or c.is_missing), None)
        if bad is None:
            return int(node.start_point[0])
        node = bad


def hunk_definitions(language: str, lines: Sequence[str]) -> tuple[Definition, ...] | None:
    """The top-level items of a hunk parsed alone (dedented, or wrapped as class members)."""
    return _hunk_definitions(language, tuple(lines))


@functools.lru_cache(maxsize=256)
def _hunk_definitions(language: str, lines: tuple[str, ...]) -> tuple[Definition, ...] | None:
    """(`hunk_definitions`, cached: a hunk is parsed by several steps.)

    Lines are hunk-relative. Returns None when the hunk does not parse into definitions; items
    that are not definitions show as kind "other" so callers can see what surrounds a definition.
    """
    row = lookup(language)
    if parser_for(language, fragment=True) is None or row is None:
        return None
    found = _parsed(language, lines)
    if found is None:
        return None
    best, score = found
    # A hunk that opens on the tail of the block before it (`}` of the last method) or stops
    # inside one it opens parses only in part; its whole items lie between those ends.
    a, b = balanced_core(Brackets(language), lines)
    inner = _parsed(language, lines[a:b]) if (a, b) != (0, len(lines)) and a < b else None
    if inner is not None and inner[1] > score:
        best = [replace(d, start=d.start + a, head=d.head + a, end=d.end + a) for d in inner[0]]
        if any(ln.strip() for ln in lines[:a]):
            best.insert(0, Definition("other", "", 0, 0, a - 1, "", False))
        if any(ln.strip() for ln in lines[b:]):
            best.append(Definition("other", "", b, b, len(lines) - 1, "", False))
    return tuple(best)


def _parsed(language: str, lines: Sequence[str]) -> tuple[list[Definition], int] | None:
    """The hunk's items as parsed bare or wrapped as class members, whichever finds more whole
    definitions, with that count; None without a parser."""
    row = lookup(language)
    if row is None:
        return None
    widths = [len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()]
    cut = min(widths) if widths else 0
    body = "\n".join(ln[cut:] if ln[:cut].strip() == "" else ln.lstrip() for ln in lines) + "\n"
    attempts = [("", "")]
    if row.member_wrap is not None:
        attempts.append(row.member_wrap)
    best: list[Definition] = []  # the bare parse always scores, so it is never left empty
    best_score = -1
    for prefix, suffix in attempts:
        tree = parse(language, (prefix + body + suffix).encode(), fragment=True)
        if tree is None:
            return None
        root = tree.root_node
        offset = prefix.count("\n")
        if prefix:
            if root.has_error:  # the wrapper's own brace was taken: the hunk is not whole members
                continue
            holder = next((c for c in root.named_children if _body(c) is not None), None)
            if holder is None or (body_node := _body(holder)) is None:
                continue
            root = body_node
        items = _items(root, offset, len(lines))
        score = sum(2 if d.complete else 1 for d in items if d.kind != "other")
        if score > best_score:
            best, best_score = items, score
    return best, best_score


def _whole(node: Any) -> bool:
    """No syntax error, and no empty block at its end (tree-sitter-python accepts a trailing
    `for x in y:` with nothing under it: the text stops inside that block)."""
    if node.has_error or node.is_missing:
        return False
    while node is not None:
        if node.type == "block" and node.start_byte == node.end_byte:
            return False
        node = node.children[-1] if node.children else None
    return True


def _items(root: Any, offset: int, n: int) -> list[Definition]:
    out: list[Definition] = []
    for child in root.named_children:
        start, end = child.start_point[0] - offset, child.end_point[0] - offset
        if end < 0 or start >= n:
            continue
        found = _unwrap(child)
        name = _name(found[0]) if found else None
        if found is None or not name:
            kind = "comment" if "comment" in child.type else "other"
            out.append(
                Definition(
                    kind, "", max(start, 0), max(start, 0), min(end, n - 1), "", _whole(child)
                )
            )
            continue
        node, kind = found
        out.append(
            Definition(
                kind,
                name,
                max(start, 0),
                node.start_point[0] - offset,
                min(end, n - 1),
                "",
                _whole(child),
            )
        )
    return out


# Languages content detection may return, in order of preference within a family: JavaScript
# parses as TypeScript and C as C++, so the narrower grammar wins when both parse. Grammars that
# accept almost any text (Bash, the data and markup formats) are never guessed; PHP only with
# its opening tag, since outside it PHP's grammar takes everything as text.
_FAMILIES: tuple[tuple[str, ...], ...] = (
    ("python",),
    ("javascript", "typescript", "tsx"),
    ("go",),
    ("rust",),
    ("java",),
    ("c", "cpp"),
    ("csharp",),
    ("kotlin",),
    ("swift",),
    ("scala",),
    ("ruby",),
    ("lua",),
    ("php",),
)
_MIN_LINES = 5  # fewer nonblank lines than this say too little to tell languages apart


def guess_language(lines: Sequence[str]) -> str:
    """The language a file's content is written in when exactly one family's grammar parses it
    without an error and finds a named definition in it, else "" (too short, no grammar parses
    it, several do, or the parse holds no definition: data files parse as code too)."""
    if lines and lines[0].startswith("#!"):  # `#!/usr/bin/env python3`: the interpreter says
        words = lines[0][2:].replace("/", " ").split()
        words = words[words.index("env") + 1 :] if "env" in words else words[-1:]
        row = lookup(words[0].rstrip("0123456789.")) if words else None
        return row.name if row else ""
    if sum(1 for ln in lines if ln.strip()) < _MIN_LINES:
        return ""
    data = encode_lines(lines)
    found = []
    for family in _FAMILIES:
        if family == ("php",) and b"<?php" not in data:
            continue
        for name in family:
            tree = parse(name, data)
            if tree is not None and not tree.root_node.has_error:
                found.append(name) if definitions_of(tree.root_node) else None
                break
        if len(found) > 1:
            return ""
    return found[0] if found else ""

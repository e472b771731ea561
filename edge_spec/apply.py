"""Code apply: prompts for apply models, the naive-merge reference, and output cleaning.

The original file and the snippet (and their naive merge) are registered as references, so the
reference drafter copies unchanged code in long verified runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any

from edge_spec.chat import chat_tokens
from edge_spec.drafters.base import Reference
from edge_spec.errors import UserError
from edge_spec.loop import GenConfig
from edge_spec.stats import Stats
from edge_spec.verify import SamplingConfig

if TYPE_CHECKING:
    from edge_spec.engine import Engine

MARKER = re.compile(r"^\s*(#|//|/\*|<!--|--|;|%)?\s*\.\.\.\s*(existing code|rest of|unchanged)[^\n]*$",
                    re.IGNORECASE)

SYSTEM = ("You merge code edits. Apply the edit snippet to the original file and output the "
          "complete updated file in one code block, with nothing else.")


@dataclass(frozen=True)
class Template:
    """How one family of apply models wants its input, and how its answer is delimited."""

    name: str
    system: str | None
    user: str
    answer_prefix: str
    stop: tuple[str, ...]


TEMPLATES: dict[str, Template] = {
    "instruct": Template(
        "instruct", SYSTEM,
        "{instruction_line}Original file:\n{fence}{lang}\n{original_nl}{fence}\n\n"
        "Edit snippet (`... existing code ...` stands for unchanged code):\n"
        "{fence}{lang}\n{update_nl}{fence}\n\nOutput the complete updated file.",
        "{fence}{lang}\n", ("\n{fence}",)),
    "fastapply": Template(
        "fastapply", None,
        "<instruction>{instruction}</instruction>\n<code>{original}</code>\n"
        "<update>{update}</update>",
        "<updated-code>", ("</updated-code>",)),
    "aixapply": Template(
        "aixapply", None,
        "<source_file>\n{original_nl}</source_file>\n<update_snippet>\n{update_nl}</update_snippet>",
        "<update_file>\n", ("</update_file>",)),
}

LANGS = {".py": "python", ".js": "javascript", ".ts": "typescript", ".go": "go", ".rs": "rust",
         ".java": "java", ".c": "c", ".cpp": "cpp", ".rb": "ruby", ".tsx": "tsx", ".jsx": "jsx"}


@dataclass
class ApplyResult:
    """The merged file, the raw model answer and the generation stats."""

    text: str
    raw: str
    stats: Stats
    template: str
    extra: dict[str, Any] = field(default_factory=dict)
    # 1-based lines of the model's answer that are edit markers the original does not have:
    # the model left code out ("lazy" output). `fallback` says what replaced its text, if anything.
    lazy_lines: list[int] = field(default_factory=list)
    fallback: str | None = None


def pick_template(metadata: dict[str, str], override: str | None = None) -> Template:
    """The template named by `override`, else one chosen from the model's GGUF metadata.

    A model not trained on an apply format gets `instruct`: on the demo target it merged 14/60
    dev tasks exactly (11 of the 40 that all three ran), against 5/40 for `fastapply` and 3/40
    for `aixapply` (benchmarks/cpu-2core-templates).
    """
    if override:
        if override not in TEMPLATES:
            raise UserError(f"unknown template {override!r}: use one of {', '.join(TEMPLATES)}")
        return TEMPLATES[override]
    name = (metadata.get("general.name", "") + " " + metadata.get("general.basename", "")).lower()
    if "aixapply" in name:
        return TEMPLATES["aixapply"]
    if "fastapply" in name or "fast-apply" in name or "morph" in name:
        return TEMPLATES["fastapply"]
    return TEMPLATES["instruct"]


def _fence(*texts: str) -> str:
    longest = max((len(m) for t in texts for m in re.findall(r"`{3,}", t)), default=2)
    return "`" * max(3, longest + 1)


def build_messages(tpl: Template, original: str, update: str, instruction: str | None,
                   lang: str = "") -> tuple[list[dict[str, str]], str, tuple[str, ...]]:
    """(messages, assistant answer prefix, stop strings) for one apply request."""
    fence = _fence(original, update)
    instr = (instruction or "").strip()
    values = dict(original=original, update=update, fence=fence,
                  original_nl=original if original.endswith("\n") else original + "\n",
                  update_nl=update if update.endswith("\n") else update + "\n",
                  lang=lang, instruction=instr,
                  instruction_line=f"Instruction: {instr}\n\n" if instr else "")
    msgs = [] if tpl.system is None else [{"role": "system", "content": tpl.system}]
    msgs.append({"role": "user", "content": tpl.user.format(**values)})
    stop = tuple(s.format(fence=fence) for s in tpl.stop)
    return msgs, tpl.answer_prefix.format(**values), stop


def naive_merge(original: str, update: str) -> str:
    """Expand each `... existing code ...` marker of the snippet into the original lines it elides.

    A reference for drafting only (the model decides the output): where the answer follows the
    snippet, this predicts the changed lines as well as the copied ones.
    """
    orig = original.splitlines()
    chunks: list[list[str]] = [[]]
    for line in update.splitlines():
        if MARKER.match(line):
            chunks.append([])
        else:
            chunks[-1].append(line)
    out: list[str] = []
    pos = 0
    for chunk in chunks:
        while chunk and not chunk[-1].strip():
            chunk = chunk[:-1]
        if not any(ln.strip() for ln in chunk):
            continue
        span = _locate(orig, chunk, pos)
        if span is None:
            out.extend(chunk)
            continue
        s, e = span
        out.extend(orig[pos:s])
        out.extend(chunk)
        pos = max(pos, e)
    out.extend(orig[pos:])
    return "\n".join(out) + ("\n" if original.endswith("\n") else "")


def edit_references(original: str, update: str) -> tuple[Reference, Reference]:
    """The naive merge and the original, each cut where the merge departs from the original."""
    merged = naive_merge(original, update)
    a, b = original.splitlines(keepends=True), merged.splitlines(keepends=True)
    off_a = [0]
    for ln in a:
        off_a.append(off_a[-1] + len(ln))
    off_b = [0]
    for ln in b:
        off_b.append(off_b[-1] + len(ln))
    cuts_a: set[int] = set()
    cuts_b: set[int] = set()
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            cuts_a.update((off_a[i1], off_a[i2]))
            cuts_b.update((off_b[j1], off_b[j2]))
    return Reference(merged, sorted(cuts_b)), Reference(original, sorted(cuts_a))


def _locate(orig: list[str], chunk: list[str], pos: int) -> tuple[int, int] | None:
    """The span of original lines [s, e) that `chunk` replaces, anchored on matching lines."""
    lines = [(j, ln.strip()) for j, ln in enumerate(chunk) if ln.strip()]
    distinctive = [(j, ln) for j, ln in lines if len(ln) >= 4] or lines
    first = next(((j, i) for j, ln in distinctive
                  if (i := _find(orig, ln, pos)) is not None), None)
    if first is None:
        j, ln = distinctive[0]
        i = _fuzzy(orig, ln, pos)
        if i is None:
            return None
        first = (j, i)
    j1, i1 = first
    j2, i2 = j1, i1
    window = i1 + 2 * len(chunk) + 20
    for j, ln in reversed(distinctive):
        if j <= j1:
            break
        i = _find(orig, ln, i1 + 1, window)
        if i is not None:
            j2, i2 = j, i
            break
    if j2 == j1 and distinctive[-1][0] > j1:  # no exact end anchor: try a fuzzy one
        j, ln = distinctive[-1]
        i = _fuzzy(orig, ln, i1 + 1, stop=window)
        if i is not None:
            j2, i2 = j, i
    s = max(pos, i1 - j1)
    e = min(len(orig), i2 + 1 + (len(chunk) - 1 - j2))
    return s, max(s, e)


def _find(lines: list[str], target: str, start: int, stop: int | None = None) -> int | None:
    for i in range(start, min(len(lines), stop or len(lines))):
        if lines[i].strip() == target:
            return i
    return None


def _fuzzy(lines: list[str], target: str, start: int, cutoff: float = 0.7,
           stop: int | None = None) -> int | None:
    best, best_i = cutoff, None
    for i in range(start, min(len(lines), stop or len(lines))):
        sm = SequenceMatcher(None, lines[i].strip(), target)
        if sm.quick_ratio() > best and sm.ratio() > best:
            best, best_i = sm.ratio(), i
    return best_i


def clean_output(raw: str, original: str, prefix: str = "", stop: tuple[str, ...] = (),
                 stopped: bool = True) -> str:
    """Strip a wrapping fence or output tags; keep the original's final-newline convention.

    The body is never altered: only the wrapper goes, and a final newline is added or removed
    to match the original file.
    """
    text = raw
    if stopped and any(s.startswith("\n") for s in stop):
        text += "\n"  # the stop string ("\n```") took the body's last newline with it
    if not prefix:  # the model wrote its own wrapper
        m = re.match(r"^\s*(`{3,})[^\n]*\n", text)
        if m:
            text = text[m.end():]
            close = text.rfind("\n" + m.group(1))
            if close >= 0:
                text = text[:close + 1]
        for open_tag, close_tag in (("<updated-code>", "</updated-code>"),
                                    ("<update_file>", "</update_file>")):
            if text.lstrip().startswith(open_tag):
                text = text.lstrip()[len(open_tag):].split(close_tag)[0]
    if prefix.startswith("<") and text.startswith("\n") and not original.startswith("\n"):
        text = text[1:]
    if original.endswith("\n") and not text.endswith("\n"):
        text += "\n"
    elif original and not original.endswith("\n") and text.endswith("\n"):
        text = text[:-1]
    if "\r\n" in original:
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    return text


def lazy_lines(text: str, original: str) -> list[int]:
    """1-based lines of `text` that are `... existing code ...` markers not in `original`.

    >>> lazy_lines("a\\n# ... existing code ...\\nb\\n", "a\\nx\\nb\\n")
    [2]
    """
    have = {ln.strip() for ln in original.splitlines() if MARKER.match(ln)}
    return [i for i, ln in enumerate(text.splitlines(), 1)
            if MARKER.match(ln) and ln.strip() not in have]


LAZY_POLICIES = ("keep", "naive", "error")


def _lazy_policy(res: ApplyResult, policy: str, original: str, merged: str) -> ApplyResult:
    """Apply `policy` to an answer with elided code: keep it, use `merged` (the naive merge, LF
    line ends), or refuse."""
    res.lazy_lines = lazy_lines(res.text, original)
    if not res.lazy_lines or policy == "keep" or res.stats.finish_reason == "cancelled":
        return res
    where = ", ".join(map(str, res.lazy_lines[:8])) + (" ..." if len(res.lazy_lines) > 8 else "")
    if policy == "error":
        raise UserError(f"the model left {len(res.lazy_lines)} '... existing code ...' marker(s) "
                        f"in the merged file (line {where}), so code would be lost; use a model "
                        "trained for apply, or accept the naive merge (on_lazy='naive')")
    text = str(merged)  # the drafting reference is the naive merge already; drop its cuts
    res.text = text.replace("\n", "\r\n") if "\r\n" in original else text
    res.fallback = "naive"
    return res


def apply(engine: Engine, original: str, update: str, instruction: str | None = None, *,
          template: str | None = None, lang: str = "", max_tokens: int | None = None,
          sampling: SamplingConfig | None = None, draft: str | None = None,
          fixed_k: int | None = None, on_delta: Callable[[str], None] | None = None,
          cancel: Any = None, on_lazy: str = "keep") -> ApplyResult:
    """Merge `update` into `original` with the engine's model; lossless speculative decoding.

    An answer that still holds `... existing code ...` markers lists them in `lazy_lines`;
    `on_lazy` then keeps it ("keep"), returns the naive merge instead ("naive") or raises
    ("error"). Streamed deltas are always the model's own text.
    """
    if on_lazy not in LAZY_POLICIES:
        raise UserError(f"unknown on_lazy {on_lazy!r}: use one of {', '.join(LAZY_POLICIES)}")
    crlf = "\r\n" in original
    original_lf, update_lf = original.replace("\r\n", "\n"), update.replace("\r\n", "\n")
    tpl = pick_template(getattr(engine.target, "metadata", {}) or {}, template)
    msgs, prefix, stop = build_messages(tpl, original_lf, update_lf, instruction, lang)
    tokens = chat_tokens(engine.target, msgs)
    tokens += engine.target.tokenize(prefix, special=False)
    # The snippet's marker lines never appear in the answer: drafting them only wastes verifies.
    snippet = "\n".join(ln for ln in update_lf.splitlines() if not MARKER.match(ln))
    merged, orig_ref = edit_references(original_lf, update_lf)
    refs = [merged, orig_ref, snippet]
    budget = max_tokens or int(len(engine.target.tokenize(original_lf + update_lf)) * 1.3) + 64
    gen = GenConfig(budget, stop, sampling or SamplingConfig(), fixed_k)
    if on_delta is not None and crlf:
        user_cb = on_delta
        on_delta = lambda d: user_cb(d.replace("\n", "\r\n"))  # noqa: E731
    res = engine.run_tokens(tokens, gen, refs, draft, on_delta, cancel)
    text = clean_output(res.text, original, prefix, stop, res.stats.finish_reason == "stop")
    out = ApplyResult(text=text, raw=res.text, stats=res.stats, template=tpl.name,
                      extra={"tokens": res.tokens, "prompt": tokens})
    return _lazy_policy(out, on_lazy, original, merged)

"""Apply prompt templates: how each family of apply models wants its input."""

from __future__ import annotations

import re
from dataclasses import dataclass

from edge_spec.errors import UserError

SYSTEM = (
    "You merge code edits. Apply the edit snippet to the original file and output the "
    "complete updated file in one code block, with nothing else."
)
SYSTEM_STRICT = (
    "You merge code edits. Apply the edit snippet to the original file and output "
    "the complete updated file in one code block, with nothing else. Copy every "
    "line the snippet does not change exactly as it is in the original; never "
    "write `... existing code ...` or any other placeholder for code."
)


@dataclass(frozen=True)
class Template:
    """How one family of apply models wants its input, and how its answer is delimited."""

    name: str
    system: str | None
    user: str
    answer_prefix: str
    stop: tuple[str, ...]


TEMPLATES: dict[str, Template] = {
    # The original file comes first (after the fixed system prompt): an IDE that re-sends the
    # same file with a new edit then reuses the KV prefix of the whole file.
    "instruct": Template(
        "instruct",
        SYSTEM,
        "Original file:\n{fence}{lang}\n{original_nl}{fence}\n\n{instruction_line}"
        "Edit snippet (`... existing code ...` stands for unchanged code):\n"
        "{fence}{lang}\n{update_nl}{fence}\n\nOutput the complete updated file.",
        "{fence}{lang}\n",
        ("\n{fence}",),
    ),
    # A stricter wording, for A/B runs against `instruct` (edge-spec bench --template).
    "instruct-strict": Template(
        "instruct-strict",
        SYSTEM_STRICT,
        "Original file:\n{fence}{lang}\n{original_nl}{fence}\n\n{instruction_line}"
        "Edit snippet (`... existing code ...` stands for unchanged code):\n"
        "{fence}{lang}\n{update_nl}{fence}\n\nOutput the complete updated file: every "
        "unchanged line of the original, no omissions, no `...` placeholders.",
        "{fence}{lang}\n",
        ("\n{fence}",),
    ),
    "fastapply": Template(
        "fastapply",
        None,
        "<instruction>{instruction}</instruction>\n<code>{original}</code>\n"
        "<update>{update}</update>",
        "<updated-code>",
        ("</updated-code>",),
    ),
    "aixapply": Template(
        "aixapply",
        None,
        "<source_file>\n{original_nl}</source_file>\n<update_snippet>\n{update_nl}</update_snippet>",
        "<update_file>\n",
        ("</update_file>",),
    ),
}


def pick_template(metadata: dict[str, str], override: str | None = None) -> Template:
    """The template named by `override`, else one chosen from the model's GGUF metadata.

    A model not trained on an apply format gets `instruct`: on the demo target it merges more
    dev tasks exactly than the other two formats (benchmarks/results/apply-accuracy-templates-amd-epyc-2core).
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


def build_messages(
    tpl: Template, original: str, update: str, instruction: str | None, lang: str = ""
) -> tuple[list[dict[str, str]], str, tuple[str, ...]]:
    """(messages, assistant answer prefix, stop strings) for one apply request."""
    fence = _fence(original, update)
    instr = (instruction or "").strip()
    values = dict(
        original=original,
        update=update,
        fence=fence,
        original_nl=original if original.endswith("\n") else original + "\n",
        update_nl=update if update.endswith("\n") else update + "\n",
        lang=lang,
        instruction=instr,
        instruction_line=f"Instruction: {instr}\n\n" if instr else "",
    )
    msgs = [] if tpl.system is None else [{"role": "system", "content": tpl.system}]
    msgs.append({"role": "user", "content": tpl.user.format(**values)})
    stop = tuple(s.format(fence=fence) for s in tpl.stop)
    return msgs, tpl.answer_prefix.format(**values), stop

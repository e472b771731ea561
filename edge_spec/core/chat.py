"""Chat templates from model files, rendered in jinja2's immutable sandbox (CVE-2024-34359)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from edge_spec.errors import UserError, require

if TYPE_CHECKING:
    from edge_spec.runtimes.base import Runtime

Message = dict[str, str]

# Used when a model file carries no template: ChatML, which Qwen and SmolLM2 both speak.
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def render(
    template: str,
    messages: Sequence[Message],
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
) -> str:
    """Render a chat template safely; a template that reaches for Python internals is refused.

    >>> render(CHATML, [{"role": "user", "content": "hi"}])
    '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n'
    """
    jinja2 = require("jinja2", "llamacpp")
    from jinja2.sandbox import SecurityError

    try:
        return _compiled(template).render(
            messages=list(messages),
            bos_token=bos_token,
            eos_token=eos_token,
            add_generation_prompt=add_generation_prompt,
        )
    except SecurityError as exc:
        raise UserError(
            f"unsafe chat template in the model file was blocked ({exc}); "
            "use a model from a trusted source or pass --no-chat"
        ) from exc
    except (
        jinja2.TemplateError,
        ArithmeticError,
        LookupError,
        TypeError,
        ValueError,
        RecursionError,
    ) as exc:
        # A broken template in a model file is the model's fault, not a crash of ours.
        msg = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise UserError(
            f"the model's chat template failed to render ({msg}); "
            "pass --no-chat to send the prompt as raw text"
        ) from None


@lru_cache(maxsize=8)
def _compiled(template: str) -> Any:
    """The template compiled once: compiling costs more than rendering, on every request."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    # Templates test optional variables (`tools`, `documents`) for truthiness: keep them lenient.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise_exception
    return env.from_string(template)


def _raise_exception(msg: str) -> None:
    raise UserError(f"chat template refused the messages: {msg}")


def _special_text(rt: Runtime, token: int | None) -> str:
    if token is None:
        return ""
    texts = rt.vocab.token_text
    return texts[token] if texts and 0 <= token < len(texts) else ""


def chat_tokens(rt: Runtime, messages: Sequence[Message]) -> list[int]:
    """Tokenize a chat for `rt` with its own template and exactly one BOS."""
    bos = _special_text(rt, rt.bos_id)
    eos = _special_text(rt, rt.vocab.eos_id)
    text = render(rt.chat_template or CHATML, messages, bos_token=bos, eos_token=eos)
    return text_tokens(rt, text)


def text_tokens(rt: Runtime, text: str) -> list[int]:
    """Tokenize raw prompt text; add BOS only if the model wants one and it is not there yet."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserError(
            f"the prompt is not valid Unicode text ({exc.reason} at character "
            f"{exc.start}); remove lone surrogates"
        ) from None
    toks = rt.tokenize(text, add_bos=False, special=True)
    bos = rt.bos_id
    if rt.add_bos and bos is not None and (not toks or toks[0] != bos):
        toks.insert(0, bos)
    while len(toks) > 1 and bos is not None and toks[0] == bos and toks[1] == bos:
        toks.pop(0)  # a template that writes BOS plus a tokenizer that adds one: keep one
    return toks

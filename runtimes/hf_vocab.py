"""Token tables of a Hugging Face tokenizer, written the way llama.cpp reports them for the
same model, so a torch target pairs with a llama.cpp drafter of its family (same fingerprint)."""

from __future__ import annotations

from typing import Any

from edge_spec.runtimes.tokjson import EOG_TEXTS, byte_decoder, spm_piece


def vocab_type(tokenizer: Any) -> str:
    """llama.cpp's name for the tokenizer kind: bpe (byte-level), spm, ugm, wpm."""
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(
        tokenizer, "_tokenizer", None
    )
    if backend is None:
        return "unknown"
    model = type(backend.model).__name__.lower()
    if model == "bpe":
        return "spm" if getattr(backend.model, "byte_fallback", False) else "bpe"
    return {"unigram": "ugm", "wordpiece": "wpm"}.get(model, model)


def token_texts(tokenizer: Any, n_vocab: int) -> tuple[str, ...]:
    """Every id's token text; llama.cpp's converter names unused padding rows `[PAD<id>]`."""
    texts = tokenizer.convert_ids_to_tokens(list(range(min(len(tokenizer), n_vocab))))
    return tuple(t if t is not None else f"[PAD{i}]" for i, t in enumerate(texts)) + tuple(
        f"[PAD{i}]" for i in range(len(texts), n_vocab)
    )


def added_tokens(tokenizer: Any) -> dict[int, bool]:
    """Added tokens: id -> whether it is a control (special) token."""
    dec = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    return {int(i): bool(getattr(t, "special", True)) for i, t in dec.items()}


def piece_table(tokenizer: Any, texts: tuple[str, ...]) -> list[bytes]:
    """The bytes each token contributes to output text; empty for control tokens and padding."""
    added = added_tokens(tokenizer)
    n_real = len(tokenizer)
    byte_level = vocab_type(tokenizer) == "bpe"
    dec = byte_decoder()
    pieces = []
    for i, t in enumerate(texts):
        if i >= n_real or added.get(i, False) or t in EOG_TEXTS or t == f"[PAD{i}]":
            pieces.append(b"")
        elif i in added:  # a user-defined added token is written as its text
            pieces.append(t.encode("utf-8"))
        elif byte_level and all(c in dec for c in t):
            pieces.append(bytes(dec[c] for c in t))
        else:
            pieces.append(t.encode("utf-8") if byte_level else spm_piece(t))
    return pieces


def eog_ids(tokenizer: Any, model: Any, eos: int | None, texts: tuple[str, ...]) -> frozenset[int]:
    """EOS ids from the generation config, config and tokenizer, plus end-of-turn tokens."""
    ids: set[int] = set() if eos is None else {eos}
    for src in (getattr(model, "generation_config", None), model.config):
        e = getattr(src, "eos_token_id", None)
        ids.update([e] if isinstance(e, int) else list(e or []))
    ids.update(i for i, t in enumerate(texts) if t in EOG_TEXTS)
    return frozenset(int(i) for i in ids if 0 <= int(i) < len(texts))

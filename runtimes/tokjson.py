"""A tokenizer from a model folder's tokenizer.json, seen the way llama.cpp sees a GGUF vocabulary.

Uses the `tokenizers` library only (no transformers import: it is fast to load). Token texts are
the vocabulary strings (byte-level BPE `Ġthe`, SentencePiece `▁the`), which are the strings a GGUF
converter writes, so `VocabInfo.fingerprint` pairs an ONNX export with the GGUF of the same model.

Example: `tok = JsonTokenizer("exports/smollm2-onnx", n_vocab=49152)`
Example: `tok.vocab.fingerprint == llama_rt.vocab.fingerprint`
True
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edge_spec.errors import UserError, require
from edge_spec.runtimes.base import VocabInfo, fingerprint

# Token texts llama.cpp treats as end of generation besides EOS (end-of-turn and FIM tokens), and
# as control tokens whatever their type in the file; the torch runtime's tables use it too, so
# every runtime stops on the same tokens.
EOG_TEXTS = frozenset(
    {
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "<｜end▁of▁sentence｜>",
        "<end_of_utterance>",
        "<|fim_pad|>",
        "<fim-pad>",
        "<|repo_name|>",
        "<fim-repo>",
        "<REPO>",
        "<reponame>",
        "<|file_sep|>",
        "</s>",
    }
)
CONFIG_FILES = ("genai_config.json", "config.json", "generation_config.json")


def byte_decoder() -> dict[str, int]:
    """GPT-2 byte-level BPE: the printable character each byte is written as, inverted."""
    bs = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def spm_piece(text: str) -> bytes:
    """SentencePiece token text -> bytes: `▁` is a space, `<0xAB>` a raw byte."""
    if len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
        try:
            return bytes([int(text[3:5], 16)])
        except ValueError:
            pass
    return text.replace("\u2581", " ").encode("utf-8")


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from a model folder, {} when absent; a broken file is a UserError."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: unreadable JSON ({exc})") from None
    return data if isinstance(data, dict) else {}


def _first_id(value: object) -> int | None:
    if isinstance(value, list):
        value = value[0] if value else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


class JsonTokenizer:
    """tokenize / token_bytes / vocab for a folder holding tokenizer.json and model configs."""

    def __init__(self, folder: str | Path, n_vocab: int) -> None:
        tokenizers = require("tokenizers", "onnx")
        folder = Path(folder)
        path = folder / "tokenizer.json"
        if not path.is_file():
            raise UserError(f"{folder}: no tokenizer.json; re-export the model with its tokenizer")
        try:
            self._tok = tokenizers.Tokenizer.from_file(str(path))
        except Exception as exc:  # noqa: BLE001 - the library raises a bare Exception
            raise UserError(f"{path}: not a valid tokenizer.json ({exc})") from None
        self.n_vocab = n_vocab
        self.folder = folder
        self._json = read_json(path)
        self._cfg = [read_json(folder / n) for n in CONFIG_FILES]
        self._cfg[0] = self._cfg[0].get("model", {})  # genai_config.json nests the ids
        self._tcfg = read_json(folder / "tokenizer_config.json")
        added = self._json.get("added_tokens") or []
        self._specials = {int(t["id"]): bool(t.get("special", True)) for t in added}
        self.bos_id = self._special_id("bos")
        self.eos_id = self._special_id("eos")
        probe = self._tok.encode("a", add_special_tokens=True).ids
        self.add_bos = self.bos_id is not None and bool(probe) and probe[0] == self.bos_id
        self._texts: tuple[str, ...] | None = None
        self._pieces: list[bytes] | None = None
        self._vocab: VocabInfo | None = None
        self.eog_ids = self._eog_ids()

    def _special_id(self, kind: str) -> int | None:
        """BOS/EOS id: the model configs first (what a GGUF converter copies), then the tokenizer."""
        for cfg in self._cfg:
            found = _first_id(cfg.get(f"{kind}_token_id"))
            if found is not None:
                return found
        tok = self._tcfg.get(f"{kind}_token")
        tok = tok.get("content") if isinstance(tok, dict) else tok
        return self._tok.token_to_id(tok) if isinstance(tok, str) else None

    def _eog_ids(self) -> set[int]:
        ids = {self.eos_id} if self.eos_id is not None else set()
        for cfg in self._cfg:
            eos = cfg.get("eos_token_id")
            ids.update(e for e in (eos if isinstance(eos, list) else [eos]) if isinstance(e, int))
        # llama.cpp makes every token with such a text an end-of-generation control token, even
        # one the tokenizer calls ordinary (Qwen2.5's `</s>`, id 128247).
        ids.update(i for i in map(self._tok.token_to_id, EOG_TEXTS) if i is not None)
        return {i for i in ids if 0 <= i < self.n_vocab}

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = True) -> list[int]:
        # Like llama.cpp: add_bos adds BOS only when the model's tokenizer wants one.
        self._tok.encode_special_tokens = not special
        ids = self._tok.encode(text, add_special_tokens=False).ids
        if (
            add_bos
            and self.add_bos
            and self.bos_id is not None
            and (not ids or ids[0] != self.bos_id)
        ):
            ids.insert(0, self.bos_id)
        return list(ids)

    def token_text(self) -> tuple[str, ...]:
        """Vocabulary strings by id; rows the tokenizer lacks are `[PAD<id>]`, as GGUF converters write."""
        if self._texts is None:
            tok = self._tok
            self._texts = tuple(tok.id_to_token(i) or f"[PAD{i}]" for i in range(self.n_vocab))
        return self._texts

    def vocab_type(self) -> str:
        model = self._json.get("model") or {}
        kind = str(model.get("type", "")).lower()
        if kind == "bpe":
            return "spm" if model.get("byte_fallback") else "bpe"
        return {"unigram": "ugm", "wordpiece": "wpm"}.get(kind, kind or "unknown")

    def pieces(self) -> list[bytes]:
        """Bytes each token adds to output text: empty for control tokens and padding rows."""
        if self._pieces is None:
            texts = self.token_text()
            n_real = self._tok.get_vocab_size(with_added_tokens=True)
            byte_level = self.vocab_type() == "bpe"
            dec = byte_decoder()
            out = []
            for i, t in enumerate(texts):
                # Control tokens, end-of-generation texts and padding rows print nothing.
                if (
                    i >= n_real
                    or self._specials.get(i, False)
                    or i in self.eog_ids
                    or t == f"[PAD{i}]"
                ):
                    out.append(b"")
                elif i in self._specials:  # a user-defined added token is written as its text
                    out.append(t.encode("utf-8"))
                elif byte_level:
                    out.append(
                        bytes(dec[c] for c in t) if all(c in dec for c in t) else t.encode("utf-8")
                    )
                else:
                    out.append(spm_piece(t))
            self._pieces = out
        return self._pieces

    def detokenize(self, tokens: Sequence[int]) -> str:
        table = self.pieces()
        return b"".join(table[t] for t in tokens).decode("utf-8", errors="replace")

    @property
    def chat_template(self) -> str | None:
        tpl = self._tcfg.get("chat_template")
        if isinstance(tpl, str) and tpl:
            return tpl
        # transformers 5 saves the template beside the tokenizer, not inside its config.
        path = self.folder / "chat_template.jinja"
        return path.read_text(encoding="utf-8") if path.is_file() else None

    @property
    def vocab(self) -> VocabInfo:
        if self._vocab is None:
            texts = self.token_text()
            self._vocab = VocabInfo(
                size=self.n_vocab,
                vocab_type=self.vocab_type(),
                bos_id=self.bos_id,
                eos_id=self.eos_id,
                eog_ids=frozenset(self.eog_ids),
                fingerprint=fingerprint(texts, self.bos_id, self.eos_id),
                token_text=texts,
            )
        return self._vocab

"""llama-cpp-python's prompt-lookup decoding as a bench peer."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class PldPeer:
    """llama-cpp-python's own LlamaPromptLookupDecoding (needs logits_all, which it forces)."""

    def __init__(self, model_path: Path, n_ctx: int, threads: int) -> None:
        from llama_cpp import Llama
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        self._cls = LlamaPromptLookupDecoding
        # logits_all=True: without it the peer crashes with a numpy broadcast error (its scores
        # buffer is sized for n_batch rows).
        self.llm = Llama(
            model_path=str(model_path),
            n_ctx=n_ctx,
            n_threads=threads or None,
            n_threads_batch=threads or None,
            logits_all=True,
            draft_model=LlamaPromptLookupDecoding(),
            verbose=False,
        )

    def run(
        self, tokens: Sequence[int], max_tokens: int, stop: Sequence[str], num_pred: int
    ) -> dict[str, Any]:
        self.llm.draft_model = self._cls(num_pred_tokens=num_pred)
        t0 = time.perf_counter()
        first = None
        parts: list[str] = []
        n_out = 0
        finish = ""
        for chunk in self.llm.create_completion(
            list(tokens),
            max_tokens=max_tokens,
            temperature=0.0,
            stop=list(stop) or None,
            stream=True,
        ):
            if first is None:
                first = time.perf_counter()
            ch = chunk["choices"][0]
            parts.append(ch.get("text", ""))
            n_out += 1
            finish = ch.get("finish_reason") or finish
        end = time.perf_counter()
        first = first or end
        text = "".join(parts)
        n_out = len(self.llm.tokenize(text.encode(), add_bos=False, special=False)) or n_out
        decode_ms = (end - first) * 1e3
        return {
            "text": text,
            "output_tokens": n_out,
            "prefill_ms": (first - t0) * 1e3,
            "decode_ms": decode_ms,
            "decode_tok_s": n_out / (decode_ms / 1e3) if decode_ms else 0.0,
            "tokens_per_forward": None,
            "acceptance": None,
            "finish_reason": finish,
        }

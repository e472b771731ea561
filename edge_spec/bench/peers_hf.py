"""The Hugging Face transformers peer of `edge-spec bench`: `generate` on the torch build of the
same target, plain (`hf-plain`, the peer's own baseline), with prompt lookup (`hf-pld[-N]`) and
with the drafter as assistant model (`hf-assisted`). Compare its ratios to hf-plain, not times.

The models are loaded once per bench run, on first use; GGUF files go through transformers'
GGUF loader (dequantized to float32), checkpoint folders load from safetensors.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from edge_spec.bench.modes import Mode, apply_plan
from edge_spec.core.chat import chat_tokens
from edge_spec.errors import UserError, require
from edge_spec.runtimes.hf import load_model

PLD_DEFAULT = 10


class _TimingStreamer:
    """When generate emits its first new token and when it ends, and how many target forwards:
    after the prompt, generate puts once per target forward (one token, or a verified block)."""

    def __init__(self) -> None:
        self.puts = 0
        self.first: float | None = None

    def put(self, value: Any) -> None:
        self.puts += 1
        if self.puts == 2:
            self.first = time.perf_counter()

    def end(self) -> None:
        """Nothing to do: generate returns right after this."""


def _stop_criteria(rt: Any, n_prompt: int, stop: tuple[str, ...]) -> Any:
    """Stop once the output holds a stop string, judged on our runtime's bytes of each token.

    transformers' own `stop_strings` fails with an assistant model (its inner generate gets the
    strings but no tokenizer), so every hf mode uses this criterion alike.
    """
    from transformers import StoppingCriteria, StoppingCriteriaList

    tail_tokens = 8 + max(len(s.encode("utf-8")) for s in stop)  # a token is at least 1 byte

    class _Stop(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kw: Any) -> Any:
            import torch

            new = [int(t) for t in input_ids[0, max(n_prompt, input_ids.shape[1] - tail_tokens) :]]
            text = b"".join(rt.token_bytes(t) for t in new).decode("utf-8", errors="replace")
            done = any(s in text for s in stop)
            return torch.full(
                (input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device
            )

    return StoppingCriteriaList([_Stop()])


class HfPeer:
    """Stock transformers models for the hf-* modes, loaded lazily and once."""

    def __init__(self, target: Path | None, drafter: Path | None, threads: int = 0) -> None:
        self.paths = {"target": target, "drafter": drafter}
        self.threads = threads
        self._loaded: dict[str, tuple[Any, Any] | UserError] = {}

    @classmethod
    def for_engine(cls, engine: Any) -> HfPeer:
        """The torch builds of the engine's target and drafter files."""
        drafter = engine.drafter_rt
        return cls(
            engine.target.path,
            drafter.path if drafter is not None else None,
            engine.config.runtime.threads,
        )

    def load(self, what: str) -> tuple[Any, Any]:
        """(model, tokenizer) of the target or drafter; a failed load is remembered, not retried."""
        same = self.paths["drafter"] is not None and self.paths["drafter"] == self.paths["target"]
        if what == "drafter" and same:
            what = "target"  # a model drafting for itself: one copy serves both roles
        if what not in self._loaded:
            try:
                self._loaded[what] = self._load(self.paths[what], what)
            except UserError as exc:
                self._loaded[what] = exc
        got = self._loaded[what]
        if isinstance(got, UserError):
            raise got
        return got

    def _load(self, path: Path | None, what: str) -> tuple[Any, Any]:
        if path is None:
            raise UserError(
                f"hf modes need the {what} as a GGUF file or Hugging Face checkpoint"
                + (": pass --drafter" if what == "drafter" else "")
            )
        if Path(path).is_dir() and not (Path(path) / "config.json").is_file():
            raise UserError(
                f"hf modes cannot load {path}: the {what} must be a GGUF file or a "
                "Hugging Face checkpoint folder, not an ONNX export"
            )
        torch = require("torch", "torch")
        if self.threads:
            torch.set_num_threads(self.threads)
        model, tok = load_model(Path(path), "float32")
        return model.eval(), tok

    def run(
        self,
        tokens: list[int],
        mode: Mode,
        budget: int,
        stop: tuple[str, ...],
        eog: list[int],
        rt: Any,
    ) -> dict[str, Any]:
        """Greedy `generate` from prompt tokens; times, tokens and target forwards."""
        torch = require("torch", "torch")
        if mode.peer == "hf-assisted" and self.paths["drafter"] is None:
            raise UserError("hf-assisted needs a drafter: pass --drafter")
        model, _ = self.load("target")
        kw: dict[str, Any] = {}
        if mode.peer == "hf-pld":
            kw["prompt_lookup_num_tokens"] = mode.param or PLD_DEFAULT
        elif mode.peer == "hf-assisted":
            kw["assistant_model"] = self.load("drafter")[0]
        if stop:
            kw["stopping_criteria"] = _stop_criteria(rt, len(tokens), stop)
        ids = torch.tensor([tokens], dtype=torch.long)
        streamer = _TimingStreamer()
        logging = require("transformers", "torch").utils.logging
        verbosity = logging.get_verbosity()
        logging.set_verbosity_error()  # generate's deprecation chatter, per call
        try:
            t0 = time.perf_counter()
            with torch.inference_mode():
                out = model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    do_sample=False,
                    max_new_tokens=budget,
                    eos_token_id=eog,
                    pad_token_id=eog[0],
                    streamer=streamer,
                    **kw,
                )
            end = time.perf_counter()
        finally:
            logging.set_verbosity(verbosity)
        new = [int(t) for t in out[0, len(tokens) :]]
        while new and new[-1] in eog:  # the EOS that ended it and any padding after it
            new.pop()
        first = streamer.first or end
        forwards = max(0, streamer.puts - 1)
        decode_ms = (end - first) * 1e3
        return {
            "new_tokens": new,
            "prefill_ms": round((first - t0) * 1e3, 2),
            "decode_ms": round(decode_ms, 2),
            # The first token comes with the prefill; decode speed is over the rest.
            "decode_tok_s": round((len(new) - 1) / (decode_ms / 1e3), 2)
            if decode_ms > 0 and len(new) > 1
            else 0.0,
            "target_forwards": forwards,
            "tokens_per_forward": round(len(new) / forwards, 3) if forwards else None,
            "acceptance": None,
            "generated_tokens": len(new),
        }


def _cut_at_stop(rt: Any, tokens: list[int], stop: tuple[str, ...]) -> tuple[str, int, bool]:
    """(text before the first stop string, tokens up to the one completing it, stopped)."""
    text = rt.detokenize(tokens)
    hits = [(text.find(s), s) for s in stop if s and s in text]
    if not hits:
        return text, len(tokens), False
    pos, s = min(hits)
    need = len(text[: pos + len(s)].encode("utf-8"))
    n, acc = 0, 0
    while n < len(tokens) and acc < need:
        acc += len(rt.token_bytes(tokens[n]))
        n += 1
    return text[:pos], n, True


def run_hf(
    hf: HfPeer | None,
    engine: Any,
    task: dict[str, Any],
    mode: Mode,
    max_tokens: int | None,
    template: str | None = None,
) -> dict[str, Any]:
    """One hf-* measurement from the exact prompt tokens our engine uses for the task."""
    if hf is None:
        raise UserError(f"mode {mode.name} has no transformers peer in this run")
    rt = engine.target
    eog = sorted(rt.vocab.eog_ids) or [rt.vocab.eos_id]
    plan = None if "prompt" in task else apply_plan(engine, task, template, max_tokens)
    if plan is None:
        tokens = chat_tokens(rt, [{"role": "user", "content": task["prompt"]}])
        stop, budget = (), max_tokens or 256
    else:
        tokens, stop, budget = plan.tokens, plan.stop, plan.budget
    d = hf.run(tokens, mode, budget, stop, eog, rt)
    new = d.pop("new_tokens")
    text, n_out, stopped = _cut_at_stop(rt, new, stop)
    if plan is not None:
        text = plan.clean(text, stopped)
    finish = "stop" if stopped else ("length" if len(new) >= budget else "eos")
    return {
        **d,
        "text": text,
        "output_tokens": n_out,
        "finish_reason": finish,
        "baseline": "hf-plain",
    }

"""The embeddable API: an `Engine` owns a target, an optional drafter and a controller.

>>> eng = Engine("smollm2")
>>> eng.generate("Write a haiku about caches", max_tokens=32).text   # doctest: +SKIP
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from edge_spec.adapt import Controller, ControllerConfig
from edge_spec.chat import Message, chat_tokens, text_tokens
from edge_spec.drafters.hybrid import HybridDrafter
from edge_spec.drafters.model import ModelDrafter
from edge_spec.drafters.reference import ReferenceConfig, ReferenceDrafter
from edge_spec.errors import UserError
from edge_spec.loop import GenConfig, GenResult, generate
from edge_spec.pairing import check_pair
from edge_spec.verify import SamplingConfig

DEMO_TARGET = "qwen2.5-coder-1.5b-instruct-q4_k_m"
DEMO_DRAFTER = "qwen2.5-coder-0.5b-instruct"
DRAFT_MODES = ("hybrid", "reference", "model", "none")


@dataclass(frozen=True)
class EngineConfig:
    """How to load the models and which drafter to use."""

    n_ctx: int = 8192
    n_batch: int = 512
    n_threads: int = 0
    n_gpu_layers: int = 0
    runtime: str = "llamacpp"
    onnx_provider: str = "CPUExecutionProvider"
    draft: str = "hybrid"
    p_min: float = 0.6
    max_reference_chars: int = 2_000_000
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    reference: ReferenceConfig = field(default_factory=ReferenceConfig)


def load_runtime(model: str | os.PathLike[str], cfg: EngineConfig, n_ctx: int | None = None):  # noqa: ANN201
    """Resolve a model name/path and open it with the backend `cfg.runtime` names.

    llama.cpp takes a GGUF file; ort takes an exported ONNX folder; torch takes a Hugging Face
    checkpoint folder (safetensors) or a GGUF file (dequantized by transformers).
    """
    from edge_spec.models import resolve
    from edge_spec.runtimes import RuntimeOptions, backend_name, open_runtime

    kind = backend_name(cfg.runtime)
    local = Path(os.fspath(model)).expanduser()
    path = local if kind != "llamacpp" and local.is_dir() else resolve(model)
    opts = RuntimeOptions(n_ctx=n_ctx or cfg.n_ctx, n_batch=cfg.n_batch, n_threads=cfg.n_threads,
                          n_gpu_layers=cfg.n_gpu_layers, onnx_provider=cfg.onnx_provider)
    return open_runtime(kind, path, opts)


class Engine:
    """A reusable generation engine; calls are serialized, the KV prefix carries over."""

    def __init__(self, model: str | os.PathLike[str] | object = DEMO_TARGET,
                 drafter: str | os.PathLike[str] | object | None = None,
                 config: EngineConfig | None = None, profile: object | None = None) -> None:
        if profile is not None:  # a Profile, or a shipped profile name or .toml path
            from edge_spec.profile import load_profile

            prof = profile if hasattr(profile, "engine_config") else load_profile(profile)  # type: ignore[arg-type]
            config = prof.engine_config(config)  # the profile's settings over `config`
        self.config = cfg = config or EngineConfig()
        if cfg.draft not in DRAFT_MODES:
            raise UserError(f"unknown draft mode {cfg.draft!r}: use one of {', '.join(DRAFT_MODES)}")
        self.target = model if hasattr(model, "eval") else load_runtime(model, cfg)  # type: ignore[arg-type]
        self.drafter_rt = None
        if drafter is not None and cfg.draft in ("hybrid", "model"):
            self.drafter_rt = drafter if hasattr(drafter, "eval") else load_runtime(drafter, cfg)  # type: ignore[arg-type]
            check_pair(self.target.vocab, self.drafter_rt.vocab,
                       (self.target.name, self.drafter_rt.name))
        if cfg.draft == "model" and self.drafter_rt is None:
            raise UserError("--draft model needs a drafter model: pass --drafter NAME|PATH")
        self.controller = Controller(cfg.controller)
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return self.target.name

    @property
    def drafter_name(self) -> str | None:
        return self.drafter_rt.name if self.drafter_rt is not None else None

    def _drafter(self, sampling: SamplingConfig, draft: str | None):  # noqa: ANN202
        mode = draft or self.config.draft
        if mode == "none":
            return None
        ref = ReferenceDrafter(self.target, self.config.reference)
        model = (ModelDrafter(self.drafter_rt, sampling, self.config.p_min)
                 if self.drafter_rt is not None else None)
        if mode == "reference" or (mode == "hybrid" and model is None):
            return ref
        if mode == "model":
            return model
        return HybridDrafter(ref, model)

    def prompt_tokens(self, prompt: str | Sequence[Message], chat: bool = True) -> list[int]:
        """Tokens for a prompt: a string (chat-templated unless chat=False) or messages."""
        if isinstance(prompt, str):
            if not chat:
                return text_tokens(self.target, prompt)
            prompt = [{"role": "user", "content": prompt}]
        return chat_tokens(self.target, prompt)

    def run_tokens(self, tokens: Sequence[int], gen: GenConfig, references: Sequence[str] = (),
                   draft: str | None = None, on_delta=None,  # noqa: ANN001
                   cancel: threading.Event | None = None) -> GenResult:
        """Generate from prompt tokens; the lowest-level call every other one goes through."""
        total = sum(len(r) for r in references)
        if total > self.config.max_reference_chars:
            raise UserError(f"references total {total} characters, over the cap of "
                            f"{self.config.max_reference_chars}; pass smaller files")
        if len(tokens) + 1 > self.target.n_ctx:
            raise UserError(f"prompt of {len(tokens)} tokens does not fit the context of "
                            f"{self.target.n_ctx}; shorten the input or raise --n-ctx")
        gen = GenConfig(min(gen.max_tokens, self.target.n_ctx - len(tokens)), gen.stop,
                        gen.sampling, gen.fixed_k)
        with self._lock:
            drafter = self._drafter(gen.sampling, draft)
            return generate(self.target, tokens, drafter, self.controller, gen, references,
                            on_delta=on_delta, cancel=cancel)

    def generate(self, prompt: str | Sequence[Message], *, max_tokens: int = 512,
                 stop: Sequence[str] = (), sampling: SamplingConfig | None = None,
                 references: Sequence[str] = (), chat: bool = True, draft: str | None = None,
                 fixed_k: int | None = None, on_delta=None,  # noqa: ANN001
                 cancel: threading.Event | None = None) -> GenResult:
        """Generate a completion; `references` are texts the output is likely to copy."""
        gen = GenConfig(max_tokens, tuple(stop), sampling or SamplingConfig(), fixed_k)
        return self.run_tokens(self.prompt_tokens(prompt, chat), gen, references, draft,
                               on_delta, cancel)

    def stream_generate(self, prompt: str | Sequence[Message], **kw: object) -> TextStreamIter:
        """Like `generate`, but yields text deltas; `close()` or `cancel()` stops within a step."""
        return TextStreamIter(lambda on_delta, cancel: self.generate(
            prompt, on_delta=on_delta, cancel=cancel, **kw))  # type: ignore[arg-type]

    def apply(self, original: str, update: str, instruction: str | None = None,
              **kw: object):  # noqa: ANN201
        """Merge an edit snippet into a file; returns `ApplyResult(text, stats, ...)`."""
        from edge_spec.apply import apply

        return apply(self, original, update, instruction, **kw)  # type: ignore[arg-type]

    def stream_apply(self, original: str, update: str, instruction: str | None = None,
                     **kw: object) -> TextStreamIter:
        """Like `apply`, streaming the merged file's text deltas."""
        return TextStreamIter(lambda on_delta, cancel: self.apply(
            original, update, instruction, on_delta=on_delta, cancel=cancel, **kw))


def build_engine(model: str | None = None, drafter: str | None = None, *,
                 profile: str | None = None, draft: str | None = None, n_ctx: int | None = None,
                 threads: int | None = None, n_gpu_layers: int | None = None,
                 k_max: int | None = None, runtime: str | None = None,
                 bundle: str | None = None, verify_bundle: bool = False) -> Engine:
    """An Engine from command-line style options; precedence: option > profile > defaults.

    With no model, the demo pair (the profile's drafter model, if it names one). A `bundle`
    (an `edge-spec export` folder, hash-checked) supplies target, drafter, runtime and profile
    wherever the matching option is not given.
    """
    from dataclasses import replace

    if bundle is not None:
        model, drafter, runtime, profile = _bundle_args(bundle, verify_bundle, model, drafter,
                                                        runtime, profile)
    cfg = EngineConfig()
    prof = None
    if profile:
        from edge_spec.profile import load_profile

        prof = load_profile(profile)
        cfg = prof.engine_config(cfg)
    overrides = {k: v for k, v in (("n_ctx", n_ctx), ("n_threads", threads),
                                   ("n_gpu_layers", n_gpu_layers), ("draft", draft),
                                   ("runtime", runtime))
                 if v is not None}
    cfg = replace(cfg, **overrides)
    if k_max is not None:
        cfg = replace(cfg, controller=replace(cfg.controller, k_max=k_max))
    if drafter is None and model is None and cfg.draft in ("hybrid", "model"):
        drafter = (prof.drafter.model if prof is not None else "") or DEMO_DRAFTER
    return Engine(model or DEMO_TARGET, drafter, cfg)


def _bundle_args(bundle: str, verify: bool, model: str | None, drafter: str | None,
                 runtime: str | None, profile: str | None) -> tuple[str, str | None, str, str | None]:
    """(model, drafter, runtime, profile) with the bundle's filling what the options leave open."""
    from edge_spec.export.bundle import load_bundle
    from edge_spec.profile import find_profile

    b = load_bundle(bundle, verify)
    target, b_drafter, rt = b.models(runtime)
    if drafter is None and model is None and b_drafter is not None:
        drafter = str(b_drafter)
    rec = b.manifest.recommended_profile
    if profile is None and rec:
        try:  # a profile calibrated on the exporting machine may not exist here
            profile = str(find_profile(rec))
        except UserError:
            profile = None
    return model or str(target), drafter, rt, profile


class TextStreamIter:
    """Runs a generation in a worker thread and yields its deltas; `result` holds the end state."""

    _DONE = object()

    def __init__(self, run) -> None:  # noqa: ANN001
        self._q: queue.Queue = queue.Queue()
        self._cancel = threading.Event()
        self.result = None
        self._error: BaseException | None = None

        def work() -> None:
            try:
                self.result = run(self._q.put, self._cancel)
            except BaseException as exc:  # re-raised in the consumer's thread
                self._error = exc
            finally:
                self._q.put(self._DONE)

        self._thread = threading.Thread(target=work, daemon=True)
        self._thread.start()

    def __iter__(self) -> Iterator[str]:
        while True:
            item = self._q.get()
            if item is self._DONE:
                break
            yield item
        self._thread.join()
        if self._error is not None:
            raise self._error

    def cancel(self) -> None:
        """Ask the generation to stop; it does so before its next verify step."""
        self._cancel.set()

    def close(self) -> None:
        self.cancel()
        self._thread.join()


def read_text_file(path: str | os.PathLike[str], what: str, max_bytes: int = 4_000_000) -> str:
    """Read a user's source file as UTF-8 text, with one-line errors for binary or bad input."""
    import sys

    if str(path) == "-":
        data = sys.stdin.buffer.read(max_bytes + 1)
    else:
        p = Path(path)
        if not p.is_file():
            raise UserError(f"{what} file not found: {path}")
        if p.stat().st_size > max_bytes:
            raise UserError(f"{what} file {path} is {p.stat().st_size} bytes, over the "
                            f"{max_bytes}-byte limit")
        data = p.read_bytes()
    if len(data) > max_bytes:
        raise UserError(f"{what} input is over the {max_bytes}-byte limit")
    if b"\0" in data:
        raise UserError(f"{what} file {path} looks binary (it contains NUL bytes): pass a text file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} file {path} is not valid UTF-8 (byte {exc.start}): "
                        "convert it to UTF-8 first") from None

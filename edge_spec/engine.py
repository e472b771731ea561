"""The embeddable API: an `Engine` owns a target, an optional drafter model and a controller.

Example: `eng = Engine("smollm2")`
Example: `eng.generate("Write a haiku about caches", max_tokens=32).text`
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from edge_spec.apply.check.verdict import (
    MAX_PROBLEMS,
    answer_doubts,
    answer_problems,
    merge_of,
    merged_result,
    not_exact_error,
    verdicts,
)
from edge_spec.apply.choose import (
    HunkChoice,
    allowed,
    choice_record,
    choose,
    chosen_text,
    narrow_leads,
)
from edge_spec.apply.choose_windows import (
    WindowChoice,
    score_windows,
    settled,
    window_readings,
)
from edge_spec.apply.merge import MergeResult
from edge_spec.apply.plan import ApplyResult, check_policy, guard_mode, plan_apply
from edge_spec.apply.region import RegionPlan, plan_regions, run_regions
from edge_spec.config.local import BUILTIN_PROFILE, NO_PROFILE, calibrated_here
from edge_spec.config.profiles import Profile, find_profile, load_profile
from edge_spec.config.settings import (
    APPLY_ENGINES,
    DEMO_DRAFTER,
    DEMO_TARGET,
    DRAFT_MODES,
    ApplyEngine,
    DraftMode,
    EngineConfig,
    GuardMode,
    LazyPolicy,
    SamplingSettings,
)
from edge_spec.core.chat import Message, chat_tokens, text_tokens
from edge_spec.core.controller import Controller
from edge_spec.core.loop import GenConfig, GenResult, generate
from edge_spec.core.pairing import check_pair
from edge_spec.core.stats import Stats
from edge_spec.core.types import Drafter, Reference
from edge_spec.drafters.model import ModelDrafter
from edge_spec.drafters.pool import OutputPool, PoolDrafter
from edge_spec.drafters.reference import ReferenceDrafter
from edge_spec.errors import UserError
from edge_spec.export.bundle import is_bundle, load_bundle
from edge_spec.export.gguf_info import model_vocab
from edge_spec.runtimes import backend_name, open_runtime
from edge_spec.runtimes.base import Runtime, VocabInfo
from edge_spec.store.models import resolve

ModelArg = str | os.PathLike[str] | Runtime
Delta = Callable[[str], None]


def load_runtime(
    model: str | os.PathLike[str], cfg: EngineConfig, n_ctx: int | None = None
) -> Runtime:
    """Resolve a model name/path and open it with the backend `cfg.runtime.backend` names.

    llama.cpp takes a GGUF file; ort takes an exported ONNX folder; torch takes a Hugging Face
    checkpoint folder (safetensors) or a GGUF file (dequantized by transformers).
    """
    kind = backend_name(cfg.runtime.backend)
    local = Path(os.fspath(model)).expanduser()
    path = local if kind != "llamacpp" and local.is_dir() else resolve(model)
    opts = cfg.runtime if n_ctx is None else cfg.override(n_ctx=n_ctx).runtime
    return open_runtime(kind, path, opts)


def _is_runtime(obj: object) -> bool:
    return not isinstance(obj, (str, os.PathLike))


def _open(model: ModelArg, cfg: EngineConfig) -> Runtime:
    return load_runtime(model, cfg) if isinstance(model, (str, os.PathLike)) else model


def _drafter_path(model: ModelArg, cfg: EngineConfig) -> Path:
    """Where a drafter model given by name or path lives (a folder for ort/torch)."""
    local = Path(os.fspath(model)).expanduser()  # type: ignore[arg-type]
    if backend_name(cfg.runtime.backend) != "llamacpp" and local.is_dir():
        return local
    return resolve(model)  # type: ignore[arg-type]


def _stem(model: ModelArg) -> str:
    """The name a runtime would report, without loading it (catalogue names stay whole)."""
    if isinstance(model, (str, os.PathLike)):
        p = Path(os.fspath(model))
        return p.stem if p.suffix.lower() in (".gguf", ".onnx") else p.name
    return model.name


class Engine:
    """A reusable generation engine; calls are serialized, the KV prefix carries over.

    Models load on first use: an apply the structural merge answers never loads one, and the
    drafter model loads only when the controller first asks it for a draft. The target's
    pairing with the drafter is checked (from file metadata) when the target loads.
    """

    def __init__(
        self,
        model: ModelArg = DEMO_TARGET,
        drafter: ModelArg | None = None,
        config: EngineConfig | None = None,
        profile: str | os.PathLike[str] | Profile | None = None,
    ) -> None:
        prof = load_profile(profile) if profile is not None else None
        if prof is not None:  # a Profile, or a shipped profile name or .toml path
            config = prof.engine_config(config)
        self.config = cfg = config or EngineConfig()
        # Which profile set the costs, for reports (`build_engine` says when it chose one).
        self.profile_label = str(prof.path or prof.name) if prof else BUILTIN_PROFILE
        if cfg.drafter.kind not in DRAFT_MODES:
            raise UserError(
                f"unknown draft mode {cfg.drafter.kind!r}: use one of {', '.join(DRAFT_MODES)}"
            )
        wants_drafter = drafter is not None and cfg.drafter.kind in ("hybrid", "model")
        if cfg.drafter.kind == "model" and not wants_drafter:
            raise UserError("--draft model needs a drafter model: pass --drafter NAME|PATH")
        self._model = model
        self._drafter = drafter if wants_drafter else None
        self._target: Runtime | None = model if _is_runtime(model) else None
        self._drafter_rt: Runtime | None = (
            drafter if wants_drafter and _is_runtime(drafter) else None
        )
        self.controller = Controller(cfg.controller)
        # One pool of earlier outputs per user (`pool_key`: the server keys it by API key), so
        # one user's code is never drafted into another's answer.
        self.pools: dict[str, OutputPool] = {}
        self._lock = threading.Lock()
        self._load_lock = threading.RLock()
        if self._target is not None and self._drafter_rt is not None:
            self._check_pair(self._drafter_rt.vocab, self._drafter_rt.name)

    @property
    def target(self) -> Runtime:
        """The target runtime, loaded on first use."""
        with self._load_lock:
            if self._target is None:
                self._target = _open(self._model, self.config)
                if self._drafter is not None and self._drafter_rt is None:
                    path = _drafter_path(self._drafter, self.config)
                    self._check_pair(model_vocab(path), path.stem)
            return self._target

    @property
    def loaded(self) -> bool:
        """Whether the target model is loaded (a merge-only apply never loads it)."""
        return self._target is not None

    @property
    def drafter_rt(self) -> Runtime | None:
        """The drafter model's runtime, loaded on first use (None without a drafter model)."""
        with self._load_lock:
            if self._drafter_rt is None and self._drafter is not None:
                rt = _open(self._drafter, self.config)
                self._check_pair(rt.vocab, rt.name)
                self._drafter_rt = rt
            return self._drafter_rt

    def _check_pair(self, vocab: VocabInfo, name: str) -> None:
        target = self.target
        check_pair(target.vocab, vocab, (target.name, name))

    @property
    def drafter_path(self) -> Path | None:
        """The drafter model's file or folder, without loading it (None without one)."""
        if self._drafter_rt is not None:
            return self._drafter_rt.path
        return _drafter_path(self._drafter, self.config) if self._drafter is not None else None

    @property
    def model_name(self) -> str:
        return self._target.name if self._target is not None else _stem(self._model)

    @property
    def drafter_name(self) -> str | None:
        if self._drafter_rt is not None:
            return self._drafter_rt.name
        return _stem(self._drafter) if self._drafter is not None else None

    def pool(self, key: str = "", use: bool | None = None) -> OutputPool | None:
        """The pool of earlier outputs of user `key` (None when pools are off: `use`, else the
        `pool.use_pool` setting)."""
        if not (self.config.pool.use_pool if use is None else use):
            return None
        if key not in self.pools:
            self.pools[key] = OutputPool(self.config.pool)
        return self.pools[key]

    def drafters(
        self, sampling: SamplingSettings, draft: str | None = None, pool: OutputPool | None = None
    ) -> list[Drafter]:
        """The drafters a request runs, cheapest first: the controller arbitrates between them."""
        mode = draft or self.config.drafter.kind
        if mode not in DRAFT_MODES:
            raise UserError(f"unknown draft mode {mode!r}: use one of {', '.join(DRAFT_MODES)}")
        out: list[Drafter] = []
        if mode in ("hybrid", "reference"):
            out.append(ReferenceDrafter(self.target, self.config.reference))
            if pool is not None:
                out.append(PoolDrafter(pool))
        if mode in ("hybrid", "model") and self._drafter is not None:
            out.append(ModelDrafter(self._drafter_runtime, sampling, self.config.drafter.p_min))
        return out

    def _drafter_runtime(self) -> Runtime:
        rt = self.drafter_rt
        assert rt is not None  # only called when a drafter model is configured
        return rt

    def prompt_tokens(self, prompt: str | Sequence[Message], chat: bool = True) -> list[int]:
        """Tokens for a prompt: a string (chat-templated unless chat=False) or messages."""
        if isinstance(prompt, str):
            if not chat:
                return text_tokens(self.target, prompt)
            prompt = [{"role": "user", "content": prompt}]
        return chat_tokens(self.target, prompt)

    def run_tokens(
        self,
        tokens: Sequence[int],
        gen: GenConfig,
        references: Sequence[str | Reference] = (),
        draft: str | None = None,
        on_delta: Delta | None = None,
        cancel: threading.Event | None = None,
        pool_key: str = "",
        use_pool: bool | None = None,
    ) -> GenResult:
        """Generate from prompt tokens; the lowest-level call every other one goes through.

        The output joins user `pool_key`'s pool of earlier outputs (`pool`), which later
        requests draft from; `use_pool` overrides the `pool.use_pool` setting.
        """
        refs = [Reference.of(r) for r in references]
        total = sum(len(r.text) for r in refs)
        cap = self.config.reference.max_reference_chars
        if total > cap:
            raise UserError(
                f"references total {total} characters, over the cap of {cap}; pass smaller files"
            )
        if len(tokens) + 1 > self.target.n_ctx:
            raise UserError(
                f"prompt of {len(tokens)} tokens does not fit the context of "
                f"{self.target.n_ctx}; shorten the input or raise --n-ctx"
            )
        gen = replace(gen, max_tokens=min(gen.max_tokens, self.target.n_ctx - len(tokens)))
        with self._lock:
            pool = self.pool(pool_key, use_pool)
            res = generate(
                self.target,
                tokens,
                self.drafters(gen.sampling, draft, pool),
                self.controller,
                gen,
                refs,
                on_delta=on_delta,
                cancel=cancel,
            )
            if pool is not None:
                pool.add(res.tokens)
            return res

    def generate(
        self,
        prompt: str | Sequence[Message],
        *,
        max_tokens: int = 512,
        stop: Sequence[str] = (),
        sampling: SamplingSettings | None = None,
        references: Sequence[str | Reference] = (),
        chat: bool = True,
        draft: str | None = None,
        fixed_k: int | None = None,
        on_delta: Delta | None = None,
        cancel: threading.Event | None = None,
        pool_key: str = "",
        use_pool: bool | None = None,
    ) -> GenResult:
        """Generate a completion; `references` are texts the output is likely to copy."""
        gen = GenConfig(max_tokens, tuple(stop), sampling or SamplingSettings(), fixed_k)
        return self.run_tokens(
            self.prompt_tokens(prompt, chat),
            gen,
            references,
            draft,
            on_delta,
            cancel,
            pool_key,
            use_pool,
        )

    def stream_generate(self, prompt: str | Sequence[Message], **kw: Any) -> TextStreamIter:
        """Like `generate`, but yields text deltas; `close()` or `cancel()` stops within a step."""
        return TextStreamIter(
            lambda on_delta, cancel: self.generate(prompt, on_delta=on_delta, cancel=cancel, **kw)
        )

    def apply(
        self,
        original: str,
        update: str,
        instruction: str | None = None,
        *,
        template: str | None = None,
        lang: str = "",
        max_tokens: int | None = None,
        sampling: SamplingSettings | None = None,
        draft: DraftMode | None = None,
        fixed_k: int | None = None,
        on_delta: Delta | None = None,
        cancel: threading.Event | None = None,
        on_lazy: LazyPolicy = "keep",
        engine: ApplyEngine = "auto",
        path: str | None = None,
        guard: GuardMode | bool | None = None,
        pool_key: str = "",
        use_pool: bool | None = None,
    ) -> ApplyResult:
        """Merge an edit snippet into a file.

        `engine`: "auto" returns the structural merge when it is sure of every hunk (no model
        is loaded or run), else the model writes it: by region (a window around each unsure
        hunk, the merge supplying the rest; `apply.region`) when every hunk is placed and the
        windows are a small part of the file, else the whole file; "region" is by region
        whenever every hunk is placed; "merge" is the structural merge only (a UserError names
        the hunk it is not sure of); "model" always runs the model on the whole file, with the
        merge as its drafting reference (lossless speculative decoding). A model's
        answer is checked (`suspect`); one that still holds `... existing code ...` markers
        lists them in `lazy_lines` and `on_lazy` keeps it, returns the merge or raises.
        `path` (the file's name) picks the merge's language when `lang` does not. `guard`
        (default `apply.guard`, "order") constrains the answer at decode time: "lines" to
        lines of the original and the snippet, "order" to those in the texts' order (no skip
        the snippet does not show), "markers" against marker lines the original
        lacks, "off" (False) not at all. It is part of the target, so plain and speculative
        decoding both apply it. A model's answer joins user `pool_key`'s pool (`run_tokens`).
        """
        check_policy(on_lazy)
        guard = guard_mode(self.config.apply.guard if guard is None else guard)
        if engine not in APPLY_ENGINES:
            raise UserError(
                f"unknown apply engine {engine!r}: use one of {', '.join(APPLY_ENGINES)}"
            )
        merge = merge_of(original, update, lang, path)
        if not merge.hunks:  # nothing to place, nothing a model could be checked against
            raise UserError(
                "the edit snippet has no lines to apply (it is empty or only markers): pass the "
                "changed lines with their context"
            )
        if engine == "merge" and not merge.exact:
            raise not_exact_error(merge)
        if engine != "model" and merge.exact:
            res = merged_result(merge)
            if on_delta is not None:
                on_delta(res.text)
            return res
        regions = (
            None if engine in ("model", "merge") else self._regions(original, update, merge, engine)
        )
        tried: list[dict[str, Any]] = []  # a choice scored but not clear: its time shows
        narrow: list[str] = []  # the warnings of windows the target chose by a narrow lead
        if engine == "auto":  # `region` forces the model to write the windows
            inside = (
                None
                if regions is None
                else window_readings(original, update, merge, regions, self.config.apply)
            )
            if regions is None or inside is None:
                picked, tried = self._choose(original, update, merge, instruction, lang)
            else:
                picked, tried, narrow, regions = self._choose_windows(
                    original, update, merge, regions, inside, instruction, lang, template
                )
            if picked is not None:
                if on_delta is not None:
                    on_delta(picked.text)
                return picked

        def run(
            text: str, edit: str, merged: str, cb: Delta | None, whole: MergeResult | None = None
        ) -> ApplyResult:
            plan = plan_apply(
                self.target,
                text,
                edit,
                instruction,
                template=template,
                lang=lang,
                max_tokens=max_tokens,
                merged=merged,
                guard=guard,
                merge=whole,
            )
            gen = GenConfig(
                plan.budget, plan.stop, sampling or SamplingSettings(), fixed_k, plan.guard
            )
            out = self.run_tokens(
                plan.tokens,
                gen,
                plan.references,
                draft,
                plan.stream_filter(cb),
                cancel,
                pool_key,
                use_pool,
            )
            return plan.finish(out.text, out.stats, out.tokens, on_lazy)

        if regions is not None:
            res = run_regions(
                regions, lambda w, cb: run(w.original, w.snippet, w.merged, cb), on_delta, original
            )
        else:
            res = run(original, update, merge.text, on_delta, merge)
        res.verdicts, res.language, res.choice = verdicts(merge), merge.language, tried
        if res.stats.finish_reason != "cancelled":
            found = answer_problems(original, update, res.text, merge)
            res.suspect = (found + [p for p in res.suspect if p not in found])[:MAX_PROBLEMS]
            res.warnings = answer_doubts(original, update, res.text, merge.language) + narrow
        return res

    def _choose(
        self, original: str, update: str, merge: MergeResult, instruction: str | None, lang: str
    ) -> tuple[ApplyResult | None, list[dict[str, Any]]]:
        """The file the target chooses among the placements the snippet allows, when it
        chooses every unsure hunk's by a clear margin (`apply.choose`); else None, with the
        choice's record when it was scored (each hunk's readings, winner, lead, and time)."""
        cfg = self.config.apply
        if cfg.choose_max < 2 or not merge.edits or len(merge.edits) != len(merge.hunks):
            return None, []
        choices = allowed(original, update, merge, cfg)
        if choices is None or any(len(c.edits) < 2 for c in choices):
            return None, []  # one reading left is the check's, not the target's choice
        t0 = time.perf_counter()
        with self._lock:
            scored = choose(self.target, original, update, merge, choices, cfg, lang, instruction)
        ms = (time.perf_counter() - t0) * 1e3
        clear = all(c.margin >= cfg.choose_margin for c in scored)
        record = choice_record(scored, clear, ms)
        if not clear:
            return None, record
        return self._chosen(original, update, merge, scored, ms), []

    def _choose_windows(
        self,
        original: str,
        update: str,
        merge: MergeResult,
        plan: RegionPlan,
        choices: Sequence[WindowChoice],
        instruction: str | None,
        lang: str,
        template: str | None,
    ) -> tuple[ApplyResult | None, list[dict[str, Any]], list[str], RegionPlan]:
        """The target's choice in each region window it can choose in (`apply.choose_windows`):
        the file when every window is chosen by a clear margin; else the plan with the chosen
        windows settled, the choice's record and the warnings of narrow leads."""
        cfg = self.config.apply
        if not choices:
            return None, [], [], plan
        t0 = time.perf_counter()
        with self._lock:
            scored = score_windows(
                self.target, original, merge, choices, cfg, lang, instruction, template
            )
        ms = (time.perf_counter() - t0) * 1e3
        chosen = [wc for wc in scored if wc.clear(cfg.choose_margin)]
        hunks = [c for wc in scored for c in wc.hunks]
        if len(chosen) == len(plan.windows):
            return self._chosen(original, update, merge, hunks, ms), [], [], plan
        record = [
            r for wc in scored for r in choice_record(wc.hunks, wc.clear(cfg.choose_margin), ms)
        ]
        won = [c for wc in chosen for c in wc.hunks]
        return (
            None,
            record,
            narrow_leads(won, cfg.choose_warn),
            settled(original, plan, merge, chosen),
        )

    def _chosen(
        self,
        original: str,
        update: str,
        merge: MergeResult,
        scored: Sequence[HunkChoice],
        ms: float,
    ) -> ApplyResult:
        """The file with every unsure hunk where the target chose it, checked."""
        text = chosen_text(original, merge, scored)
        res = ApplyResult(
            text=text,
            raw=text,
            stats=Stats(draft="none", finish_reason="stop", prefill_ms=ms),
            template="",
            engine="choice",
            verdicts=verdicts(merge),
            language=merge.language,
            choice=choice_record(scored, True, ms),
        )
        res.suspect = answer_problems(original, update, text, merge)
        res.warnings = answer_doubts(original, update, text, merge.language) + narrow_leads(
            scored, self.config.apply.choose_warn
        )
        return res

    def _regions(
        self, original: str, update: str, merge: MergeResult, engine: ApplyEngine
    ) -> RegionPlan | None:
        """The windows the model rewrites; by region when the file would not fit the context."""
        plan = plan_regions(original, update, merge, self.config.apply, force=engine == "region")
        if plan is not None or engine == "region":
            return plan
        rt = self.target
        # A whole-file apply holds the file twice (prompt and answer) and the snippet once.
        if 2 * len(rt.tokenize(original)) + len(rt.tokenize(update)) <= rt.n_ctx:
            return None
        return plan_regions(original, update, merge, self.config.apply, force=True)

    def stream_apply(
        self, original: str, update: str, instruction: str | None = None, **kw: Any
    ) -> TextStreamIter:
        """Like `apply`, streaming the merged file's text deltas."""
        return TextStreamIter(
            lambda on_delta, cancel: self.apply(
                original, update, instruction, on_delta=on_delta, cancel=cancel, **kw
            )
        )


def build_engine(
    model: str | None = None,
    drafter: str | None = None,
    *,
    profile: str | None = None,
    draft: str | None = None,
    n_ctx: int | None = None,
    threads: int | None = None,
    n_gpu_layers: int | None = None,
    k_max: int | None = None,
    runtime: str | None = None,
    bundle: str | None = None,
    verify_bundle: bool = False,
    guard: str | None = None,
    pool: bool | None = None,
) -> Engine:
    """An Engine from command-line style options; precedence: option > profile > defaults.

    With no model, the demo pair (the profile's drafter model, if it names one). A `bundle`
    (an `edge-spec export` folder, hash-checked) supplies target, drafter, runtime and profile
    wherever the matching option is not given. With no profile named, a profile calibrated on
    this machine for this target comes before the bundle's recommendation and the defaults;
    `profile="none"` asks for the built-in defaults.
    """
    recommended = None
    if bundle is None and model is not None and is_bundle(model):
        bundle, model = model, None  # `--model BUNDLE`: the folder names the pair and runtime
    if bundle is not None:
        model, drafter, runtime, recommended = _bundle_args(
            bundle, verify_bundle, model, drafter, runtime
        )
    target = model or DEMO_TARGET
    backend = backend_name(runtime) if runtime else EngineConfig().runtime.backend
    prof, label = _choose_profile(profile, recommended, target, backend, n_gpu_layers or 0)
    cfg = prof.engine_config() if prof is not None else EngineConfig()
    cfg = cfg.override(
        n_ctx=n_ctx,
        threads=threads,
        n_gpu_layers=n_gpu_layers,
        kind=draft,
        backend=backend_name(runtime) if runtime else None,
        k_max=k_max,
        guard=guard,
        use_pool=pool,
    )
    if drafter is None and model is None and cfg.drafter.kind in ("hybrid", "model"):
        drafter = cfg.drafter.model or DEMO_DRAFTER
    engine = Engine(target, drafter, cfg)
    engine.profile_label = label
    return engine


def _choose_profile(
    profile: str | None, recommended: str | None, target: str, backend: str, n_gpu_layers: int
) -> tuple[Profile | None, str]:
    """(the profile, a label for reports): named > calibrated here > recommended > none."""
    if profile is not None and profile.strip().lower() == NO_PROFILE:
        return None, BUILTIN_PROFILE
    if profile:
        prof = load_profile(profile)
        return prof, str(prof.path or prof.name)
    here = calibrated_here(target, backend, n_gpu_layers)
    if here is not None:
        return here.profile, here.label()
    if recommended:
        try:  # a profile calibrated on the exporting machine may not exist here
            path = find_profile(recommended)
        except UserError:
            return None, BUILTIN_PROFILE
        return load_profile(path), str(path)
    return None, BUILTIN_PROFILE


def _bundle_args(
    bundle: str, verify: bool, model: str | None, drafter: str | None, runtime: str | None
) -> tuple[str, str | None, str, str | None]:
    """(model, drafter, runtime, recommended profile) with the bundle's filling what the
    options leave open."""
    b = load_bundle(bundle, verify)
    target, b_drafter, rt = b.models(runtime)
    if drafter is None and model is None and b_drafter is not None:
        drafter = str(b_drafter)
    return model or str(target), drafter, rt, b.manifest.recommended_profile or None


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

"""The settings tree: every default and bound of edge-spec, in one place.

Profiles (TOML), the command line and the Python API all read these dataclasses: a profile's
`[runtime]`, `[drafter]` and `[controller]` tables are `RuntimeSettings`, `DrafterSettings` and
`ControllerSettings` field for field, and CLI choices come from the tuples below. Each field's
bounds live in its metadata (`setting(...)`), so the TOML loader and click types check the same
ranges. Precedence: command-line flag > profile > these defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any, Literal, get_args

DEMO_TARGET = "qwen2.5-coder-1.5b-instruct-q4_k_m"
DEMO_DRAFTER = "qwen2.5-coder-0.5b-instruct"

Backend = Literal["llamacpp", "ort", "torch"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)
BACKEND_ALIASES: Mapping[str, str] = {
    "onnx": "ort",
    "onnxruntime": "ort",
    "hf": "torch",
    "transformers": "torch",
    "llama.cpp": "llamacpp",
}
DraftMode = Literal["hybrid", "reference", "model", "none"]
DRAFT_MODES: tuple[DraftMode, ...] = get_args(DraftMode)
DTYPES = ("auto", "float32", "float16", "bfloat16")
# What a request asks for; `AnsweredBy` is who wrote the file it got back.
ApplyEngine = Literal["auto", "model", "merge", "region"]
APPLY_ENGINES: tuple[ApplyEngine, ...] = get_args(ApplyEngine)
AnsweredBy = Literal["merge", "model", "region", "choice"]
EXPORT_FORMATS = ("gguf", "onnx")
ONNX_QUANTS = ("int4", "int8", "none")
ONNX_EXPORTERS = ("builder", "optimum")
ONNX_TARGETS = ("cpu", "cuda")
LazyPolicy = Literal["keep", "naive", "error"]
LAZY_POLICIES: tuple[LazyPolicy, ...] = get_args(LazyPolicy)
# The apply guard: only lines of the original and the snippet, no marker lines, or none.
GuardMode = Literal["order", "lines", "markers", "off"]
GUARD_MODES: tuple[GuardMode, ...] = get_args(GuardMode)
COST_SOURCES = ("measured", "estimated")
# The verify-cost table of a profile must cover at least these draft+1 sizes.
REQUIRED_POINTS = (1, 2, 4, 8, 16, 32, 64, 128)
MAX_POINT = 512


def setting(
    default: Any = None,
    *,
    lo: float | None = None,
    hi: float | None = None,
    choices: tuple[str, ...] | None = None,
    toml: bool = True,
    factory: Any = None,
) -> Any:
    """A dataclass field with its bounds; `toml=False` fields are not read from profiles."""
    meta = {"lo": lo, "hi": hi, "choices": choices, "toml": toml}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def bounds(cls: type, name: str) -> tuple[float | None, float | None]:
    """(lo, hi) of a field of a settings class."""
    f = _field(cls, name)
    return f.metadata.get("lo"), f.metadata.get("hi")


def choices(cls: type, name: str) -> tuple[str, ...]:
    return _field(cls, name).metadata.get("choices") or ()


def toml_fields(cls: type) -> list[Field[Any]]:
    """The fields a profile table may set."""
    return [f for f in fields(cls) if f.metadata.get("toml", True)]


def _field(cls: type, name: str) -> Field[Any]:
    for f in fields(cls):
        if f.name == name:
            return f
    raise KeyError(f"{cls.__name__} has no setting {name!r}")


def canonical_backend(name: str) -> str | None:
    """The canonical backend name, or None if `name` is not one."""
    key = BACKEND_ALIASES.get(name.lower(), name.lower())
    return key if key in BACKENDS else None


@dataclass(frozen=True)
class RuntimeSettings:
    """`[runtime]`: how to open the models (each backend reads what applies to it)."""

    backend: str = setting("llamacpp", choices=BACKENDS + tuple(BACKEND_ALIASES))
    threads: int = setting(0, lo=0, hi=1024)  # 0: all cores; also the host argmax's threads
    n_gpu_layers: int = setting(0, lo=-1, hi=100_000)  # -1: all; ort/torch: non-zero = GPU
    n_ctx: int = setting(8192, lo=64, hi=1 << 20)
    n_batch: int = setting(512, lo=1, hi=1 << 16)
    onnx_provider: str = setting("CPUExecutionProvider")
    dtype: str = setting("auto", choices=DTYPES)  # torch: auto = fp32 on CPU, bf16/fp16 on CUDA
    flash_attn: bool = setting(False)  # llama.cpp
    # llama.cpp: the CPU backend repacks quantized weights into its own buffers, so a mapped
    # file stays resident beside the copy; reading it once halves the weights' share of RSS.
    # Turn it on to share one file's pages between processes on a node.
    mmap: bool = setting(False)


@dataclass(frozen=True)
class DrafterSettings:
    """`[drafter]`: which drafters run and which drafter model."""

    kind: str = setting("hybrid", choices=DRAFT_MODES)
    model: str = setting("")  # catalogue name or path; "" = the demo drafter with the demo target
    quant: str = setting("")
    p_min: float = setting(0.6, lo=0.0, hi=1.0)  # model drafts stop under this top-1 probability


# Rows per task when a long greedy verify's host argmax is spread over the idle cores
# (`runtimes.base.ArgmaxPool`): a block must outweigh handing it to a worker thread.
ARGMAX_ROW_BLOCK = 16

# One verify step (logits on every row) of the 1.5B demo target on the 2-core dev CPU, in ms
# (profiles/cpu-2core.toml). Only its shape matters as a prior: the controller rescales it
# from measured step times.
DEFAULT_VERIFY_MS: Mapping[int, float] = {
    1: 45.8,
    2: 87.3,
    4: 144.2,
    8: 333.6,
    16: 440.8,
    32: 782.2,
    64: 1535.8,
    128: 2800.4,
}
# Per-token acceptance priors per draft feature (prefix match). An apply answer's start and a
# copy that has held for 8 tokens or more break only at an edit point (per-feature rates of
# recorded apply runs under the default guard: benchmarks/results/controller-replay-2core), so
# they are priced for long drafts from the first step. A fresh match keeps a doubtful prior:
# in free text it is mostly a coincidence, wrong from its first token. Learned estimates
# replace them.
DEFAULT_FEATURE_PRIORS: Mapping[str, float] = {
    "ref-start": 0.999,
    "ref-a": 0.95,
    "ref-a-s8": 0.998,
    "ref-a-s64": 0.999,
    "ref-n-gt16": 0.9,
    "ref-n-le16": 0.85,
    "ref-n-le8": 0.8,
    "ref-n-le4": 0.7,
    "ref-n-le2": 0.5,
    "ref-text": 0.6,
    # The same drafts in a request with no reference (a chat or free prompt): a match is in
    # the prompt's instructions or the answer so far, which an answer echoes for a few tokens
    # (a name, a signature) and then leaves; only a long match is a quote going on. A
    # machine whose verify cost grows with its length declines them; one where it is flat
    # still drafts them.
    "ref-f": 0.5,
    "ref-f-a": 0.6,
    "ref-f-a-s8": 0.8,
    "ref-f-a-s64": 0.95,
    "ref-f-n-gt16": 0.85,
    "model": 0.7,
    # Pool drafts (what followed the same context in an earlier output), by match length:
    # a long match is the same edit again; a short one is often common code going elsewhere.
    # An answer's start matched to earlier answers' starts is as doubtful as a short match
    # (its tokens' shares say how many went on alike); a copy going on after a draft taken
    # whole holds like a reference copy, and one picked up after a rejection nearly so.
    "pool": 0.6,
    "pool-start": 0.6,
    "pool-a": 0.95,
    "pool-r": 0.85,
    "pool-le2": 0.3,
    "pool-le4": 0.5,
    "pool-le8": 0.7,
    "pool-le16": 0.85,
    "pool-gt16": 0.9,
}


@dataclass(frozen=True)
class ControllerSettings:
    """`[controller]`: bounds and smoothing of the draft-length controller.

    `verify_ms` and `draft_cost_ratio` come from a profile's `[costs]`, not from `[controller]`.
    """

    k_max: int = setting(128, lo=1, hi=MAX_POINT)
    prior_accept: float = setting(0.7, lo=0.0, hi=1.0)
    prior_weight: float = setting(4.0, lo=0.0, hi=1e6)
    # The prior of a reference draft's pooled hazard, as this many rejections at the prior's
    # rate: a hazard near zero then needs more than one rejection to rise far.
    prior_events: float = setting(0.5, lo=1e-3, hi=1e6)
    decay: float = setting(0.98, lo=0.0, hi=1.0)
    request_decay: float = setting(0.1, lo=0.0, hi=1.0)
    cost_smoothing: float = setting(0.3, lo=0.0, hi=1.0)
    # How many steps' worth of evidence the profile table's shape (cost by forward size,
    # relative to the other sizes) counts for before measured steps bend it.
    cost_shape_weight: float = setting(8.0, lo=0.0, hi=1e6)
    # Per multi-token step, how much of that evidence is kept: a machine's shape changes
    # rarely (its load moves the shared scale, which follows `cost_smoothing`).
    cost_shape_decay: float = setting(0.995, lo=0.0, hi=1.0)
    # The same for one forward size's own departure from the smooth curve (kernels faster at
    # multiples of their tile width): more steps of that size are needed to move it.
    cost_size_weight: float = setting(4.0, lo=0.0, hi=1e9)
    probe_every: int = setting(24, lo=1, hi=1 << 20)
    # A drafter model's prefill (once per request) must cost at most this share of the plain
    # decoding time left before it is asked at all.
    probe_prefill_share: float = setting(0.1, lo=0.0, hi=1e6)
    feature_priors: Mapping[str, float] = setting(
        toml=False, factory=lambda: dict(DEFAULT_FEATURE_PRIORS)
    )
    verify_ms: Mapping[int, float] = setting(toml=False, factory=lambda: dict(DEFAULT_VERIFY_MS))
    # Drafting cost per token relative to one target forward of one token, until measured.
    draft_cost_ratio: Mapping[str, float] = setting(
        toml=False, factory=lambda: {"reference": 0.001, "pool": 0.001, "model": 0.53}
    )


@dataclass(frozen=True)
class ReferenceSettings:
    """Knobs of the reference drafter (not in profiles: they depend on the text, not the machine)."""

    ngram_min: int = setting(2, lo=1, hi=64)
    ngram_max: int = setting(32, lo=1, hi=1024)
    text_min_chars: int = setting(12, lo=1, hi=1024)
    max_reference_tokens: int = setting(200_000, lo=1)
    max_reference_chars: int = setting(2_000_000, lo=1)


@dataclass(frozen=True)
class PoolSettings:
    """The pool of earlier outputs one engine drafts from (`edge_spec.drafters.pool`; not in
    profiles: what repeats depends on the work, not the machine)."""

    # Off until it is shown to pay: on applies the snippet already holds the changed lines,
    # and a long pool draft verified in one batch can flip a numeric near-tie of greedy.
    use_pool: bool = setting(False)
    # Estimated memory of one pool; the oldest outputs go first past it.
    pool_max_mb: float = setting(64.0, lo=0.0, hi=1 << 20)
    pool_ngram: int = setting(3, lo=1, hi=64)  # tokens a lookup key holds
    pool_match_max: int = setting(64, lo=1, hi=4096)  # longest match measured
    pool_candidates: int = setting(16, lo=1, hi=1024)  # recent occurrences kept per key
    # A draft ends where fewer than this share of the matching occurrences go on alike.
    pool_min_share: float = setting(0.5, lo=0.0, hi=1.0)


@dataclass(frozen=True)
class ApplySettings:
    """How an apply the merge is unsure of goes to the model (not in profiles: text, not machine).

    The model rewrites a window of `region_context` original lines around each unsure hunk, and
    the merge supplies the rest, unless the windows would cover more than `region_max_share` of
    the file (then the whole file is rewritten; a file over the context is rewritten by region
    whatever the share).
    """

    region_context: int = setting(12, lo=0, hi=10_000)
    region_max_share: float = setting(0.6, lo=0.0, hi=1.0)
    # The decode-time guard on a model's answer (part of the target): "lines" lets it write
    # only lines of the original and the snippet (no marker, no invented line); "order" also
    # keeps them in the texts' order (no skip the snippet does not show, no end before every
    # snippet line); "markers" bans only marker-shaped lines the original lacks, for edits that
    # need lines of neither.
    guard: str = setting("order", choices=GUARD_MODES)
    # Before the model writes anything, the target chooses among the placements of each unsure
    # hunk that the answer check passes: its span's ends moved by up to `choose_reach` lines,
    # at most `choose_max` distinct ones, each scored by the target's log-likelihood (nats) of a
    # window of `choose_context` lines around it. The winner answers when it leads the next by
    # `choose_margin`; else the model writes the window (0 candidates: never choose).
    choose_reach: int = setting(4, lo=0, hi=100)
    choose_max: int = setting(6, lo=0, hi=64)
    choose_context: int = setting(6, lo=0, hi=1000)
    choose_margin: float = setting(5.0, lo=0.0, hi=1000.0)
    # A winner leading by less than this is written with a warning naming the hunk and its
    # lead: set above the lead of every wrong reading the target chose on the dev tasks.
    choose_warn: float = setting(15.0, lo=0.0, hi=1000.0)
    # Scoring stops this many tokens after the readings rejoin (the window's shared rest).
    choose_tail: int = setting(48, lo=0, hi=100_000)
    # What the readings are scored as: the answer to the apply prompt (the window and the
    # snippet as the request), or code on its own after a code fence (a third of the tokens,
    # but it chose wrong more often on held-out edits).
    choose_prompt: str = setting("apply", choices=("apply", "code"))


@dataclass(frozen=True)
class SamplingSettings:
    """How the target's next token is chosen; temperature 0 means greedy."""

    temperature: float = setting(0.0, lo=0.0, hi=100.0)
    top_k: int = setting(0, lo=0)
    top_p: float = setting(1.0, lo=0.0, hi=1.0)
    seed: int | None = setting(None, lo=0)  # numpy seeds are non-negative

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


@dataclass(frozen=True)
class ServerSettings:
    """`edge-spec serve` options."""

    host: str = setting("127.0.0.1")
    port: int = setting(8080, lo=0, hi=65535)
    api_key: str | None = setting(None)
    max_queue: int = setting(8, lo=1, hi=1 << 16)  # running + waiting requests; more get 503
    max_body_bytes: int = setting(4 * 1024 * 1024, lo=1024)
    model_id: str | None = setting(None)  # the name reported; default: the engine's model name
    # Browser and DNS-rebinding defences (edge_spec.server.guard). Host header values accepted
    # besides loopback ones (localhost, *.localhost, 127.0.0.0/8, [::1]) and the address served
    # on: names ("box.lan"), "*.lan" patterns, or "*" for any (when something in front checks).
    allowed_hosts: tuple[str, ...] = setting(())
    # Browser origins allowed to call the API besides loopback pages (http://localhost:3000),
    # as patterns ("vscode-webview://*", "https://ide.example.com", "*"); others get 403.
    allowed_origins: tuple[str, ...] = setting(())
    # JSON nested deeper than this is refused (400) before any model sees it.
    max_json_depth: int = setting(64, lo=2, hi=512)
    # Slow clients: the request line and headers, and the whole body, must arrive within these;
    # idle keep-alive connections close after keep_alive_s; past max_connections open sockets a
    # new one gets 503 and is closed.
    header_timeout_s: float = setting(10.0, lo=0.05, hi=3600.0)
    body_timeout_s: float = setting(60.0, lo=0.05, hi=3600.0)
    keep_alive_s: float = setting(5.0, lo=0.05, hi=3600.0)
    max_connections: int = setting(128, lo=1, hi=1 << 16)
    # SIGTERM: requests waiting for the engine get 503 `cancelled` at once; the running one may
    # finish until shortly before this much time has passed, then it is cancelled too.
    shutdown_grace_s: float = setting(5.0, lo=0.5, hi=3600.0)


@dataclass(frozen=True)
class ExportSettings:
    """`edge-spec export`: what to export and how."""

    formats: tuple[str, ...] = setting(("gguf",))
    drafter: str | None = setting(None)  # a second model (same tokenizer) as the drafter
    self_drafter: str | None = setting(None)  # or: the target itself at this GGUF quant
    target_quant: str = setting("Q4_K_M")
    drafter_quant: str = setting("Q4_0")
    onnx_quant: str = setting("int4", choices=ONNX_QUANTS)
    onnx_exporter: str = setting("builder", choices=ONNX_EXPORTERS)
    onnx_provider: str = setting("cpu", choices=ONNX_TARGETS)
    check: bool = setting(True)
    check_tokens: int = setting(32, lo=1, hi=4096)
    warn_agreement: float = setting(0.75, lo=0.0, hi=1.0)  # warn when a check agrees less
    threads: int = setting(0, lo=0, hi=1024)  # 0: all cores
    profile: str = setting("")  # recorded as the bundle's recommended profile


@dataclass(frozen=True)
class EngineConfig:
    """All settings an `Engine` uses: one tree, sections as in a profile.

    `override(n_ctx=..., k_max=...)` sets fields by name in whichever section holds them.
    """

    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    drafter: DrafterSettings = field(default_factory=DrafterSettings)
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    reference: ReferenceSettings = field(default_factory=ReferenceSettings)
    pool: PoolSettings = field(default_factory=PoolSettings)
    apply: ApplySettings = field(default_factory=ApplySettings)

    def override(self, **values: Any) -> EngineConfig:
        """A copy with the named fields replaced; None values are ignored (flag not given)."""
        out = self
        for name, value in values.items():
            if value is None:
                continue
            section = _SECTION_OF.get(name)
            if section is None:
                raise TypeError(f"no engine setting named {name!r}")
            out = replace(out, **{section: replace(getattr(out, section), **{name: value})})
        return out


_SECTION_OF: dict[str, str] = {
    f.name: sec
    for sec, cls in (
        ("runtime", RuntimeSettings),
        ("drafter", DrafterSettings),
        ("controller", ControllerSettings),
        ("reference", ReferenceSettings),
        ("pool", PoolSettings),
        ("apply", ApplySettings),
    )
    for f in fields(cls)
}


AFFINITY_MODES = ("prefix", "random", "least-loaded")


@dataclass(frozen=True)
class ClusterSettings:
    """`edge-spec serve --cluster`: the Ray Serve deployment (edge_spec.server.cluster).

    Each engine replica owns one Engine and runs one request at a time, so
    `max_ongoing_requests` stays 1 unless the engine learns batching; requests past
    `max_queued_requests` waiting at the ingress get 503 + Retry-After.
    """

    replicas: int = setting(1, lo=1, hi=4096)  # fixed count, unless autoscaling bounds differ
    min_replicas: int | None = setting(None, lo=0, hi=4096)  # autoscaling when min != max
    max_replicas: int | None = setting(None, lo=1, hi=4096)
    num_cpus: float = setting(1.0, lo=0.0, hi=1024.0)  # Ray resources per engine replica
    num_gpus: float = setting(0.0, lo=0.0, hi=64.0)
    threads: int = setting(1, lo=0, hi=1024)  # engine threads per replica; match num_cpus
    max_ongoing_requests: int = setting(1, lo=1, hi=1024)
    # Requests a replica holds beyond those it runs: it starts the next one the moment one
    # ends, instead of idling while Ray's router backs off and re-probes.
    backlog: int = setting(1, lo=0, hi=1024)
    max_queued_requests: int = setting(16, lo=1, hi=1 << 16)  # per ingress; then 503
    # Placement: custom Ray resources each engine replica needs (e.g. one unit of a resource
    # every engine node offers once) and Serve's cap on replicas per node.
    resources: Mapping[str, float] = setting(factory=dict)
    max_replicas_per_node: int | None = setting(None, lo=1, hi=4096)
    affinity: str = setting("prefix", choices=AFFINITY_MODES)
    affinity_min_chars: int = setting(256, lo=0)  # shorter shared prefixes are not worth it
    address: str | None = setting(None)  # Ray cluster to join; None: start a local one
    app_name: str = setting("edge-spec")

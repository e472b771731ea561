"""`edge-spec run`: code apply (--original/--update) or free generation (--prompt)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from edge_spec.apply.languages import fence_tag
from edge_spec.apply.plan import ApplyResult
from edge_spec.cli.options import chosen_guard, guard_options, model_options, runtime_options
from edge_spec.cli.output import emit_json, float_range, int_range, note_profile
from edge_spec.cli.review import (
    apply_fields,
    diff_text,
    doubt_warnings,
    engine_note,
    lazy_warning,
    print_diff,
    suspect_warning,
    verdict_lines,
)
from edge_spec.config.settings import (
    APPLY_ENGINES,
    LAZY_POLICIES,
    MAX_POINT,
    ApplyEngine,
    Backend,
    ControllerSettings,
    DraftMode,
    GuardMode,
    LazyPolicy,
    SamplingSettings,
)
from edge_spec.engine import Engine, build_engine
from edge_spec.errors import UserError
from edge_spec.fsutil import check_writable, read_text_file, write_text


def summary_line(d: dict[str, Any]) -> str:
    """The one-line human summary printed on stderr."""
    line = (
        f"[{d['finish_reason']}] prompt {d['prompt_tokens']} tok"
        f" (cached {d['cached_tokens']}), prefill {d['prefill_ms']:.0f} ms"
        f" ({d['prefill_tok_s']:.1f} tok/s) | output {d['output_tokens']} tok,"
        f" decode {d['decode_tok_s']:.1f} tok/s"
    )
    if d["draft"] != "none":
        line += (
            f" | draft {d['draft']}: {d['tokens_per_forward']:.2f} tok/forward,"
            f" accepted {d['accepted']}/{d['drafted']} ({100 * d['acceptance']:.0f}%)"
        )
    return line


def result_dict(res: Any, engine: Any, text: str) -> dict[str, Any]:
    d = res.stats.to_dict()
    d.update(text=text, model=engine.model_name, drafter=engine.drafter_name)
    d.update(apply_fields(res))
    return d


@click.command()
@click.option("--prompt", help="Free generation from this prompt.")
@click.option("--original", type=str, help="Code apply: the original file ('-' for stdin).")
@click.option("--update", type=str, help="Code apply: the edit snippet file ('-' for stdin).")
@click.option("--instruction", help="Code apply: what the edit does.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the merged file here (atomic).")
@click.option("--template", help="Apply prompt template: instruct, fastapply, aixapply.")
@click.option(
    "--engine",
    "apply_engine",
    type=click.Choice(APPLY_ENGINES),
    default="auto",
    show_default=True,
    help="Code apply: auto (the structural merge when it is sure of every hunk, no "
    "model; else the model), merge (structural only; exit 2 naming an unsure "
    "hunk) or model (the model writes the file, the merge drafts).",
)
@click.option(
    "--on-suspect",
    type=click.Choice(("refuse", "write")),
    default="refuse",
    show_default=True,
    help="Code apply: when the check finds the model's file wrong (snippet lines "
    "missing, original code dropped outside the edit, a parse error): leave "
    "--out untouched, or write it anyway; either way exit code 3.",
)
@click.option(
    "--diff",
    "show_diff",
    is_flag=True,
    help="Code apply: print the change as a unified diff with each hunk's verdict "
    "instead of the file (with --out, the file is written too).",
)
@click.option(
    "--on-lazy",
    type=click.Choice(LAZY_POLICIES),
    default="naive",
    show_default=True,
    help="Code apply: when the model's answer still holds '... existing code ...' "
    "markers (code left out): write the naive merge instead, keep the answer, or "
    "fail. A streamed answer is already out: it gets a warning and exit code 3.",
)
@click.option(
    "--lang", default="", help="Language tag for the code fence (default: from the file name)."
)
@model_options
@runtime_options
@guard_options
@click.option(
    "--reference",
    "references",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="A text file the output is likely to copy (repeatable).",
)
@click.option("--max-tokens", type=click.IntRange(1), default=None, help="Output token limit.")
@click.option("--stop", multiple=True, help="Stop string (repeatable).")
@click.option(
    "--temperature",
    type=float_range(SamplingSettings, "temperature"),
    default=0.0,
    show_default=True,
)
@click.option("--top-k", type=int_range(SamplingSettings, "top_k"), default=0)
@click.option("--top-p", type=click.FloatRange(0, 1, min_open=True), default=1.0)
@click.option("--seed", type=int_range(SamplingSettings, "seed"), default=None)
@click.option(
    "--k-max", type=int_range(ControllerSettings, "k_max"), default=None, help="Longest draft."
)
@click.option(
    "--fixed-k",
    type=click.IntRange(0, MAX_POINT),
    default=None,
    help="Fixed draft length (no adaptation).",
)
@click.option(
    "--no-chat", is_flag=True, help="Send --prompt as raw text, without the chat template."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout when done.")
@click.option("--quiet", "-q", is_flag=True, help="No summary on stderr.")
def run(**o: Any) -> None:
    """Run the main job: code apply, or free generation, speculative by default."""
    _run(RunArgs(**o))


@dataclass(frozen=True)
class RunArgs:
    """`run`'s options, typed (click passes them by these names)."""

    prompt: str | None
    original: str | None
    update: str | None
    instruction: str | None
    out: str | None
    template: str | None
    apply_engine: ApplyEngine
    on_suspect: str
    guard: GuardMode | None
    no_guard: bool
    show_diff: bool
    on_lazy: LazyPolicy
    lang: str
    model: str | None
    drafter: str | None
    bundle: str | None
    verify: bool
    draft: DraftMode | None
    pool: bool | None
    runtime: Backend | None
    profile: str | None
    threads: int | None
    n_ctx: int | None
    n_gpu_layers: int | None
    references: tuple[str, ...]
    max_tokens: int | None
    stop: tuple[str, ...]
    temperature: float
    top_k: int
    top_p: float
    seed: int | None
    k_max: int | None
    fixed_k: int | None
    no_chat: bool
    as_json: bool
    quiet: bool

    @property
    def applying(self) -> bool:
        return self.original is not None or self.update is not None

    @property
    def streaming(self) -> bool:
        return not self.as_json and self.out is None and not self.show_diff


def _check(a: RunArgs) -> None:
    if a.applying and (a.original is None or a.update is None):
        raise UserError("code apply needs both --original FILE and --update FILE")
    if a.applying == (a.prompt is not None):
        raise UserError("pass either --prompt TEXT or --original FILE --update FILE")
    if a.original == "-" and a.update == "-":
        raise UserError("only one of --original and --update can read stdin ('-')")


def _on_delta(delta: str) -> None:
    sys.stdout.write(delta)
    sys.stdout.flush()


def _run(a: RunArgs) -> None:
    _check(a)
    texts = (
        (read_text_file(a.original, "original"), read_text_file(a.update, "update"))
        if a.original is not None and a.update is not None
        else None
    )
    refs = [read_text_file(p, "reference") for p in a.references]
    if a.out:
        check_writable(a.out)  # before any model runs: a bad --out loses nothing
    engine = build_engine(
        a.model,
        a.drafter,
        profile=a.profile,
        draft=a.draft,
        n_ctx=a.n_ctx,
        threads=a.threads,
        n_gpu_layers=a.n_gpu_layers,
        k_max=a.k_max,
        runtime=a.runtime,
        bundle=a.bundle,
        verify_bundle=a.verify,
        pool=a.pool,
    )
    note_profile(engine.profile_label, a.profile)
    sampling = SamplingSettings(a.temperature, a.top_k, a.top_p, a.seed)
    cb = _on_delta if a.streaming else None
    exit_code = 0
    if texts is not None:
        res, exit_code = _apply(a, engine, texts[0], texts[1], sampling, cb)
    else:
        res = engine.generate(
            a.prompt or "",
            max_tokens=a.max_tokens or 512,
            stop=a.stop,
            sampling=sampling,
            references=refs,
            chat=not a.no_chat,
            fixed_k=a.fixed_k,
            on_delta=cb,
        )
        if a.streaming:
            sys.stdout.write("\n")
    sys.stdout.flush()
    d = result_dict(res, engine, res.text)
    refuse = texts is not None and bool(res.suspect) and a.on_suspect == "refuse"
    if a.out and not refuse:
        write_text(a.out, res.text)
    if a.as_json:
        emit_json(d)
    elif not a.quiet and d.get("engine") != "merge":  # a merge has no decoding to report
        click.echo(summary_line(d), err=True)
    if exit_code:
        sys.exit(exit_code)


def _apply(
    a: RunArgs,
    engine: Engine,
    original: str,
    update: str,
    sampling: SamplingSettings,
    cb: Callable[[str], None] | None,
) -> tuple[ApplyResult, int]:
    """The apply itself, its diff and notes on stderr, and the exit code its checks give."""
    assert a.original is not None
    lang = a.lang or fence_tag(a.original)
    policy: LazyPolicy = "keep" if a.streaming else a.on_lazy
    res = engine.apply(
        original,
        update,
        a.instruction,
        template=a.template,
        lang=lang,
        max_tokens=a.max_tokens,
        sampling=sampling,
        fixed_k=a.fixed_k,
        on_delta=cb,
        on_lazy=policy,
        engine=a.apply_engine,
        guard=chosen_guard(a.guard, a.no_guard),
        path=None if a.original == "-" else a.original,
    )
    if a.streaming and not res.raw.endswith("\n") and res.text.endswith("\n"):
        sys.stdout.write("\n")
    if a.show_diff:
        print_diff(diff_text(original, res.text, Path(a.original).name))
    if not a.quiet:
        for line in verdict_lines(res) if a.show_diff else []:
            click.echo(line, err=True)
        click.echo(engine_note(res, a.apply_engine), err=True)
    exit_code = lazy_warning(res, a.streaming, a.on_lazy)
    wrote = a.streaming or (a.on_suspect == "write" and bool(a.out))
    doubt_warnings(res, wrote)
    return res, suspect_warning(res, wrote=wrote) or exit_code

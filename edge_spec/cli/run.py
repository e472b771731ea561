"""`edge-spec run`: code apply (--original/--update) or free generation (--prompt)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from edge_spec.apply.languages import fence_tag
from edge_spec.cli.output import emit_json, float_range, int_range, model_options, note_profile
from edge_spec.cli.review import (
    apply_fields,
    diff_text,
    engine_note,
    lazy_warning,
    print_diff,
    suspect_warning,
    verdict_lines,
)
from edge_spec.config.settings import (
    APPLY_ENGINES,
    BACKENDS,
    GUARD_MODES,
    LAZY_POLICIES,
    MAX_POINT,
    ControllerSettings,
    RuntimeSettings,
    SamplingSettings,
)
from edge_spec.engine import build_engine
from edge_spec.errors import UserError
from edge_spec.fsutil import check_writable, read_text_file, write_text


def summary_line(d: dict[str, Any]) -> str:
    """The one-line human summary printed on stderr."""
    line = (f"[{d['finish_reason']}] prompt {d['prompt_tokens']} tok"
            f" (cached {d['cached_tokens']}), prefill {d['prefill_ms']:.0f} ms"
            f" ({d['prefill_tok_s']:.1f} tok/s) | output {d['output_tokens']} tok,"
            f" decode {d['decode_tok_s']:.1f} tok/s")
    if d["draft"] != "none":
        line += (f" | draft {d['draft']}: {d['tokens_per_forward']:.2f} tok/forward,"
                 f" accepted {d['accepted']}/{d['drafted']} ({100 * d['acceptance']:.0f}%)")
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
@click.option("--engine", "apply_engine", type=click.Choice(APPLY_ENGINES), default="auto",
              show_default=True,
              help="Code apply: auto (the structural merge when it is sure of every hunk, no "
                   "model; else the model), merge (structural only; exit 2 naming an unsure "
                   "hunk) or model (the model writes the file, the merge drafts).")
@click.option("--on-suspect", type=click.Choice(("refuse", "write")), default="refuse",
              show_default=True,
              help="Code apply: when the check finds the model's file wrong (snippet lines "
                   "missing, original code dropped outside the edit, a parse error): leave "
                   "--out untouched, or write it anyway; either way exit code 3.")
@click.option("--guard", "guard", type=click.Choice(GUARD_MODES), default=None,
              help="Code apply: what the model may write (part of the target): order: only "
                   "lines of the original and the snippet, in their order (default); lines: "
                   "those lines in any order; markers: "
                   "anything but marker lines the original lacks; off: anything.")
@click.option("--no-guard", is_flag=True, help="Code apply: the same as --guard off.")
@click.option("--diff", "show_diff", is_flag=True,
              help="Code apply: print the change as a unified diff with each hunk's verdict "
                   "instead of the file (with --out, the file is written too).")
@click.option("--on-lazy", type=click.Choice(LAZY_POLICIES), default="naive",
              show_default=True,
              help="Code apply: when the model's answer still holds '... existing code ...' "
                   "markers (code left out): write the naive merge instead, keep the answer, or "
                   "fail. A streamed answer is already out: it gets a warning and exit code 3.")
@click.option("--lang", default="", help="Language tag for the code fence (default: from the file name).")
@model_options
@click.option("--reference", "references", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="A text file the output is likely to copy (repeatable).")
@click.option("--max-tokens", type=click.IntRange(1), default=None, help="Output token limit.")
@click.option("--stop", multiple=True, help="Stop string (repeatable).")
@click.option("--temperature", type=float_range(SamplingSettings, "temperature"), default=0.0, show_default=True)
@click.option("--top-k", type=int_range(SamplingSettings, "top_k"), default=0)
@click.option("--top-p", type=click.FloatRange(0, 1, min_open=True), default=1.0)
@click.option("--seed", type=int, default=None)
@click.option("--k-max", type=int_range(ControllerSettings, "k_max"), default=None, help="Longest draft.")
@click.option("--fixed-k", type=click.IntRange(0, MAX_POINT), default=None, help="Fixed draft length (no adaptation).")
@click.option("--n-ctx", type=int_range(RuntimeSettings, "n_ctx"), default=None, help="Context size.")
@click.option("--threads", type=int_range(RuntimeSettings, "threads"), default=None, help="CPU threads (0: all).")
@click.option("--n-gpu-layers", type=int, default=None, help="Layers to offload to the GPU.")
@click.option("--runtime", type=click.Choice(BACKENDS), default=None,
              help="Backend: llamacpp (GGUF), ort (ONNX folder) or torch (HF folder or GGUF); "
                   "default: the profile's, else llamacpp.")
@click.option("--profile", envvar="EDGE_SPEC_PROFILE", default=None,
              help="Hardware profile: shipped/calibrated name or .toml path (env EDGE_SPEC_PROFILE; default: the one `edge-spec calibrate` measured here for this target, else built-in; "
                   "'none': built-in); flags override it.")
@click.option("--no-chat", is_flag=True, help="Send --prompt as raw text, without the chat template.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout when done.")
@click.option("--quiet", "-q", is_flag=True, help="No summary on stderr.")
def run(**o: Any) -> None:
    """Run the main job: code apply, or free generation, speculative by default."""
    applying = o["original"] is not None or o["update"] is not None
    if applying and (o["original"] is None or o["update"] is None):
        raise UserError("code apply needs both --original FILE and --update FILE")
    if applying == (o["prompt"] is not None):
        raise UserError("pass either --prompt TEXT or --original FILE --update FILE")
    if o["original"] == "-" and o["update"] == "-":
        raise UserError("only one of --original and --update can read stdin ('-')")
    if applying:
        original = read_text_file(o["original"], "original")
        update = read_text_file(o["update"], "update")
    refs = [read_text_file(p, "reference") for p in o["references"]]
    if o["out"]:
        check_writable(o["out"])  # before any model runs: a bad --out loses nothing
    engine = build_engine(o["model"], o["drafter"], profile=o["profile"], draft=o["draft"],
                          n_ctx=o["n_ctx"], threads=o["threads"],
                          n_gpu_layers=o["n_gpu_layers"], k_max=o["k_max"],
                          runtime=o["runtime"], bundle=o["bundle"], verify_bundle=o["verify"])
    note_profile(engine.profile_label, o["profile"])
    sampling = SamplingSettings(o["temperature"], o["top_k"], o["top_p"], o["seed"])
    streaming = not o["as_json"] and o["out"] is None and not o["show_diff"]

    def on_delta(delta: str) -> None:
        sys.stdout.write(delta)
        sys.stdout.flush()

    cb = on_delta if streaming else None
    exit_code = 0
    if applying:
        lang = o["lang"] or _lang(o["original"])
        policy = "keep" if streaming else o["on_lazy"]
        res = engine.apply(original, update, o["instruction"], template=o["template"], lang=lang,
                           max_tokens=o["max_tokens"], sampling=sampling, fixed_k=o["fixed_k"],
                           on_delta=cb, on_lazy=policy, engine=o["apply_engine"],
                           guard="off" if o["no_guard"] else o["guard"],
                           path=None if o["original"] == "-" else o["original"])
        text = res.text
        if streaming and not res.raw.endswith("\n") and text.endswith("\n"):
            sys.stdout.write("\n")
        if o["show_diff"]:
            print_diff(diff_text(original, text, Path(o["original"]).name))
        if not o["quiet"]:
            for line in verdict_lines(res) if o["show_diff"] else []:
                click.echo(line, err=True)
            click.echo(engine_note(res, o["apply_engine"]), err=True)
        exit_code = lazy_warning(res, streaming, o["on_lazy"])
        wrote = streaming or (o["on_suspect"] == "write" and bool(o["out"]))
        exit_code = suspect_warning(res, wrote=wrote) or exit_code
    else:
        res = engine.generate(o["prompt"], max_tokens=o["max_tokens"] or 512, stop=o["stop"],
                              sampling=sampling, references=refs, chat=not o["no_chat"],
                              fixed_k=o["fixed_k"], on_delta=cb)
        text = res.text
        if streaming:
            sys.stdout.write("\n")
    sys.stdout.flush()
    d = result_dict(res, engine, text)
    refuse = applying and bool(res.suspect) and o["on_suspect"] == "refuse"  # type: ignore[union-attr]
    if o["out"] and not refuse:
        write_text(o["out"], text)
    if o["as_json"]:
        emit_json(d)
    elif not o["quiet"] and d.get("engine") != "merge":  # a merge has no decoding to report
        click.echo(summary_line(d), err=True)
    if exit_code:
        sys.exit(exit_code)


def _lang(path: str) -> str:
    return fence_tag(path)

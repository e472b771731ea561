"""Edit snippets written by a local model, as a chat assistant writes them for an IDE's apply.

    python benchmarks/messy_qwen_snippets.py --tasks benchmarks/data/code_apply_dev_small.jsonl \
        --model qwen-1.5b --out benchmarks/data/code_apply_dev_small_qwen.jsonl [--limit N]

The model sees the original file, the instruction and the expected new file, and is asked for
what a chat model answers in an editor: only the changed code with a little context, the rest
elided with comments. Nothing tells it our marker wording, so it picks its own (that is the
point). Greedy decoding, so a run is reproducible on the same model file and llama.cpp build.

Each record is the task with `update` replaced by the model's snippet (the first fenced block
of its answer, or the whole answer), `kind` = "qwen", `variant_of` = the task id, `id` =
`<task id>~qwen`, `writer` = the model file's name, and `faithful`: whether the snippet says
the change at all (every line the expected file adds or changes is in it, and every snippet
line that is not in the original is in the expected file). A small model often writes a snippet
that misses the change or invents another; applied exactly, such a snippet cannot give the
expected file, so a merge is judged on the faithful ones. A task whose answer has no code, or
is the whole expected file, is skipped and counted. Written before any merge was measured on
it, and never edited by hand (`--mark FILE` only recomputes `faithful` of an existing file).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import time
from pathlib import Path

from edge_spec.bench.modes import read_text
from edge_spec.engine import build_engine

SYSTEM = (
    "You are a coding assistant inside a code editor. When the user asks for a change to "
    "a file, you answer with an edit snippet that the editor's apply feature merges into "
    "the file: show only the code that changes, with a few unchanged lines around it so "
    "the place is clear, and replace every unchanged part you leave out with a short "
    "comment saying that the existing code is unchanged there. Never repeat the whole "
    "file. Answer with one fenced code block and nothing else."
)

FENCE = re.compile(r"```[^\n]*\n(.*?)(?:\n```|\Z)", re.S)


def prompt_for(task: dict) -> list[dict[str, str]]:
    lang = task.get("language", "")
    user = (
        f"File `{task['path']}`:\n```{lang}\n{task['original']}```\n\n"
        f"Change: {task['instruction']}\n\n"
        f"This is how the whole file must look afterwards:\n```{lang}\n{task['expected']}```\n\n"
        "Write the edit snippet for this change."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def snippet_of(answer: str) -> str:
    m = FENCE.search(answer)
    body = m.group(1) if m else answer
    return body.rstrip("\n") + "\n" if body.strip() else ""


def faithful(task: dict) -> bool:
    """Whether applying the snippet exactly gives the expected file, as far as lines tell."""
    orig, exp = task["original"].splitlines(), task["expected"].splitlines()
    snip = [ln.strip() for ln in task["update"].splitlines() if ln.strip()]
    new = [
        ln.strip()
        for op, _, _, j1, j2 in difflib.SequenceMatcher(
            None, orig, exp, autojunk=False
        ).get_opcodes()
        if op in ("replace", "insert")
        for ln in exp[j1:j2]
        if ln.strip()
    ]
    have, want = {ln.strip() for ln in orig}, {ln.strip() for ln in exp}
    return set(new) <= set(snip) and all(ln in want for ln in snip if ln not in have)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks")
    ap.add_argument("--mark", help="recompute `faithful` in this file and exit")
    ap.add_argument("--model", default="qwen-1.5b")
    ap.add_argument("--out")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=768)
    args = ap.parse_args()
    if args.mark:
        recs = [json.loads(ln) for ln in read_text(args.mark).splitlines() if ln.strip()]
        Path(args.mark).write_text(
            "".join(json.dumps({**r, "faithful": faithful(r)}) + "\n" for r in recs)
        )
        return
    tasks = [json.loads(ln) for ln in read_text(args.tasks).splitlines() if ln.strip()]
    tasks = tasks[: args.limit] if args.limit else tasks
    eng = build_engine(args.model, draft="reference", threads=args.threads)
    out, skipped = [], {"no code": 0, "whole file": 0}
    for n, task in enumerate(tasks, 1):
        t0 = time.perf_counter()
        res = eng.generate(
            prompt_for(task), max_tokens=args.max_tokens, references=[task["expected"]]
        )
        snip = snippet_of(res.text)
        why = (
            "no code"
            if not snip.strip()
            else "whole file"
            if snip.strip() == task["expected"].strip()
            else None
        )
        print(
            f"[{n}/{len(tasks)}] {task['id']} {time.perf_counter() - t0:.1f}s "
            f"{res.stats.output_tokens} tokens {why or 'ok'}",
            file=sys.stderr,
            flush=True,
        )
        if why:
            skipped[why] += 1
            continue
        rec = {
            **task,
            "id": f"{task['id']}~qwen",
            "update": snip,
            "kind": "qwen",
            "variant_of": task["id"],
            "writer": eng.model_name,
        }
        rec["faithful"] = faithful(rec)
        out.append(json.dumps(rec))
    Path(args.out).write_text("".join(ln + "\n" for ln in out))
    print(f"wrote {len(out)} snippets to {args.out}; skipped {skipped}", file=sys.stderr)


if __name__ == "__main__":
    main()

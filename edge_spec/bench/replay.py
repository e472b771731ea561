"""Replay recorded greedy runs offline: the real loop, drafter and controller on a virtual clock.

Greedy output does not depend on the draft length, so a recorded run's output ids are the
target's answer under any draft-length policy. `ReplayRuntime` answers each verify step from
those ids (one-hot rows: only the argmax exists) and advances a virtual clock by a cost table's
price of the step; the loop, the reference drafter and the controller run unchanged. So any
policy (fixed K, the controller with other settings, an oracle that knows each draft's accepted
run) is priced exactly, against a measured or a profile's cost table, in seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from edge_spec.apply.plan import plan_apply
from edge_spec.bench.costfit import noisy_cost
from edge_spec.bench.modes import load_tasks, read_text
from edge_spec.config.settings import (
    DEMO_TARGET,
    ControllerSettings,
    ReferenceSettings,
    RuntimeSettings,
    SamplingSettings,
)
from edge_spec.core.controller import Controller, FixedK, Policy
from edge_spec.core.loop import GenConfig, generate
from edge_spec.core.types import EMPTY, Draft, Drafter
from edge_spec.drafters.reference import ReferenceDrafter
from edge_spec.runtimes import open_runtime
from edge_spec.runtimes.base import Runtime, VocabInfo
from edge_spec.store.models import resolve


def table_cost(table: Mapping[int, float]) -> Callable[[int], float]:
    """ms of one forward over n tokens: the table interpolated, extrapolated linearly past it."""
    xs = np.array(sorted(table), dtype=np.float64)
    ys = np.array([table[int(x)] for x in xs], dtype=np.float64)
    slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]) if len(xs) > 1 else ys[0] / xs[0]

    def cost(n: int) -> float:
        if n > xs[-1]:
            return float(ys[-1] + slope * (n - xs[-1]))
        if n < xs[0]:
            return float(ys[0] * n / xs[0])
        return float(np.interp(n, xs, ys))

    return cost


class VirtualClock:
    """A clock in ms that only moves when a priced step happens."""

    def __init__(self) -> None:
        self.ms = 0.0

    def __call__(self) -> float:
        return self.ms


class _Row:
    def __init__(self, token: int) -> None:
        self.token = token

    def argmax(self) -> int:
        return self.token


class OneHotRows:
    """Stands in for logits rows whose argmax is known: `rows[i].argmax()` is `ids[i]`."""

    def __init__(self, ids: Sequence[int]) -> None:
        self.ids = list(ids)

    def __getitem__(self, i: int) -> _Row:
        return _Row(self.ids[i])

    def __len__(self) -> int:
        return len(self.ids)


class ReplayRuntime:
    """The target as a recorded answer: a real runtime's tokenizer, the recorded output's ids."""

    def __init__(
        self,
        tok: Runtime,
        prompt: Sequence[int],
        output: Sequence[int],
        cost: Callable[[int], float],
        clock: VirtualClock,
    ) -> None:
        self._tok, self._cost, self._clock = tok, cost, clock
        eos = tok.vocab.eos_id
        self._truth = [*prompt, *output, eos if eos is not None else 0]
        self._tokens: list[int] = []
        self.name, self.path = f"replay:{tok.name}", tok.path
        self.n_vocab, self.n_batch = tok.n_vocab, 1 << 16
        self.n_ctx = len(self._truth) + 1024

    @property
    def n_tokens(self) -> int:
        return len(self._tokens)

    @property
    def tokens(self) -> list[int]:
        return self._tokens

    def eval(self, tokens: Sequence[int], rows: Sequence[int] | None = None) -> Any:
        start = len(self._tokens)
        self._tokens.extend(int(t) for t in tokens)
        want = [len(tokens) - 1] if rows is None else list(rows)
        if want:  # a verify step (prefill evaluates without rows and is not priced)
            self._clock.ms += self._cost(len(tokens))
        end = len(self._truth) - 1
        return OneHotRows([self._truth[min(start + r + 1, end)] for r in want])

    def greedy(self, tokens: Sequence[int], banned: Any = None) -> list[int]:
        start = len(self._tokens)
        self._tokens.extend(int(t) for t in tokens)
        self._clock.ms += self._cost(len(tokens))
        end, out = len(self._truth) - 1, []
        for i in range(len(tokens)):
            best = self._truth[min(start + i + 1, end)]
            out.append(best)
            if i == len(tokens) - 1 or best != tokens[i + 1]:
                break
        return out

    def truncate(self, n: int) -> None:
        del self._tokens[n:]

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = True) -> list[int]:
        return self._tok.tokenize(text, add_bos=add_bos, special=special)

    def token_bytes(self, token: int) -> bytes:
        return self._tok.token_bytes(token)

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self._tok.detokenize(tokens)

    def is_eog(self, token: int) -> bool:
        return self._tok.is_eog(token)

    @property
    def vocab(self) -> VocabInfo:
        return self._tok.vocab

    @property
    def chat_template(self) -> str | None:
        return self._tok.chat_template

    @property
    def metadata(self) -> dict[str, str]:
        return self._tok.metadata

    @property
    def bos_id(self) -> int | None:
        return self._tok.bos_id

    @property
    def add_bos(self) -> bool:
        return self._tok.add_bos


class OraclePolicy:
    """Knows the answer: covers the draft's correct prefix (plus the bonus token) with the
    cheapest forwards. Where the cost per token falls with the forward's size that is one
    forward over the whole prefix; where a machine's kernels are faster at some sizes (64
    rows can cost less than 63, and less per token than 128) it may split the prefix, or pad
    the forward with draft tokens it knows are wrong.

    An upper bound on any draft-length policy over the same drafter's proposals, up to
    planning one correct prefix at a time (a later draft may reach further).
    """

    def __init__(
        self, truth: Sequence[int], n_prompt: int, cost: Callable[[int], float], k_max: int
    ) -> None:
        self.truth, self.n_prompt, self.cost, self.k_max = list(truth), n_prompt, cost, k_max
        self._c = np.asarray([math.inf] + [cost(n) for n in range(1, k_max + 2)])

    def select(
        self, drafters: Sequence[Drafter], context: Sequence[int], limit: int
    ) -> tuple[Draft, int]:
        if limit <= 0 or not drafters:
            return EMPTY, 0
        draft = drafters[0].propose(context, min(limit, self.k_max))
        at = len(context) - self.n_prompt
        a = 0
        while a < len(draft) and at + a < len(self.truth) and draft.tokens[a] == self.truth[at + a]:
            a += 1
        return draft, self._plan(a, len(draft))

    def _plan(self, a: int, n_draft: int) -> int:
        """How many draft tokens to verify now, to yield a + 1 tokens in the least time."""
        if a == 0:
            return 0
        c, need = self._c, a + 1
        # One forward over the whole prefix, padded up to the draft's end where cheaper.
        whole = need + int(np.argmin(c[need : n_draft + 2]))
        # Or several exact forwards (one over s tokens yields s): best[t] = least ms to yield
        # t tokens, last[t] = one forward of that split.
        best, last = np.zeros(need + 1), np.zeros(need + 1, dtype=np.intp)
        for t in range(1, need + 1):
            opts = c[t:0:-1] + best[:t]  # sizes t, t-1, ..., 1 after best[0], ..., best[t-1]
            i = int(np.argmin(opts))
            best[t], last[t] = opts[i], t - i
        if c[whole] <= best[need]:
            return whole - 1
        parts, t = [], need
        while t:
            parts.append(int(last[t]))
            t -= parts[-1]
        # The longest forward first: the order does not change this prefix's cost, and a
        # prefix that runs past the draft is planned again from where this step ends.
        return max(parts) - 1

    def observe(self, draft: Draft, k: int, accepted: int, verify_ms: float) -> None:
        """Nothing to learn: the oracle already knows."""

    def new_request(self) -> None:
        """Nothing to reset."""


@dataclass(frozen=True)
class ReplayCase:
    """One recorded task: what the replay needs to rebuild its prompt and references."""

    task: dict[str, Any]
    output_ids: list[int]
    prompt_ids: list[int] | None = None
    finish_reason: str = "eos"


def policy_for(
    name: str,
    ctl_cfg: ControllerSettings,
    case: ReplayCase,
    n_prompt: int,
    cost: Callable[[int], float],
    controller: Controller | None = None,
) -> Policy:
    """`fixed-K`, `adaptive` or `oracle`; the controller is `controller` (what it learned on
    earlier cases carries over, as in an engine serving many requests), else a fresh one."""
    if name == "oracle":
        return OraclePolicy(case.output_ids, n_prompt, cost, ctl_cfg.k_max)
    ctl = controller or Controller(ctl_cfg)
    if name.startswith("fixed-"):
        return FixedK(int(name.removeprefix("fixed-")), ctl)
    if name == "adaptive":
        return ctl
    raise ValueError(f"unknown replay policy {name!r}: use fixed-K, adaptive or oracle")


@dataclass(frozen=True)
class World:
    """What verify steps cost in the replayed world: `table` (None: the controller's own
    prior, so the prior is the truth) times log-normal noise of `noise` per step; `seed` picks
    another draw of that noise (0: the draw every earlier replay used)."""

    table: Mapping[int, float] | None = None
    noise: float = 0.0
    seed: int = 0


def replay_case(
    tok: Runtime,
    case: ReplayCase,
    policy: str,
    ctl_cfg: ControllerSettings,
    template: str | None = None,
    ref_cfg: ReferenceSettings | None = None,
    controller: Controller | None = None,
    world: World = World(),
) -> dict[str, Any]:
    """Run the real loop over one recorded task with `policy`; the virtual time it took."""
    t = case.task
    plan = plan_apply(
        tok,
        t["original"],
        t["update"],
        t.get("instruction"),
        template=template,
        lang=t.get("language", ""),
    )
    cost = table_cost(world.table or ctl_cfg.verify_ms)
    clock = VirtualClock()
    key = f"{t.get('id')}/{policy}" + (f"/{world.seed}" if world.seed else "")
    step_cost = noisy_cost(cost, world.noise, key)
    rt = ReplayRuntime(tok, plan.tokens, case.output_ids, step_cost, clock)
    n_out = len(case.output_ids) + (case.finish_reason == "eos")
    pol = policy_for(policy, replace(ctl_cfg), case, len(plan.tokens), cost, controller)
    drafter = ReferenceDrafter(rt, ref_cfg or ReferenceSettings())
    gen = GenConfig(n_out, (), SamplingSettings())
    res = generate(rt, plan.tokens, [drafter], pol, gen, plan.references, clock=clock)
    same = res.tokens == case.output_ids
    # Plain decoding pays the mean of a noisy 1-token step, as every policy's steps do.
    plain_ms = cost(1) * math.exp(world.noise**2 / 2) * len(res.tokens)
    steps = res.stats.steps
    return {
        "task_id": t.get("id"),
        "policy": policy,
        "output_tokens": len(res.tokens),
        "decode_ms": round(clock.ms, 1),
        "plain_ms": round(plain_ms, 1),
        "speedup": round(plain_ms / clock.ms, 3) if clock.ms else None,
        "forwards": len(steps),
        "drafted": sum(s.k for s in steps),
        "accepted": sum(s.accepted for s in steps),
        "same_output": same,
        "prompt_matches": case.prompt_ids is None or case.prompt_ids == plan.tokens,
    }


def replay_all(
    tok: Runtime,
    cases: Sequence[ReplayCase],
    policies: Sequence[str],
    ctl_cfg: ControllerSettings,
    template: str | None = None,
    fresh: bool = False,
    world: World = World(),
) -> list[dict[str, Any]]:
    """Every case under every policy. Each policy keeps one controller across the cases, in
    order, as `edge-spec bench` keeps one per mode (`fresh`: a new controller per case)."""
    ctls = {p: Controller(ctl_cfg) for p in policies}
    return [
        replay_case(
            tok, c, p, ctl_cfg, template, controller=None if fresh else ctls[p], world=world
        )
        for c in cases
        for p in policies
    ]


def cases_from_results(
    records: Sequence[dict[str, Any]], tasks: Sequence[dict[str, Any]], mode: str = "plain"
) -> list[ReplayCase]:
    """One case per task from a bench results.json (the `mode` run's output ids)."""
    by_id = {t["id"]: t for t in tasks}
    out = []
    for r in records:
        if r.get("mode") == mode and r.get("output_ids") and r.get("task_id") in by_id:
            out.append(
                ReplayCase(
                    by_id[r["task_id"]],
                    list(r["output_ids"]),
                    r.get("prompt_ids"),
                    r.get("finish_reason") or "eos",
                )
            )
    return out


def cases_from_file(
    results: Path, tasks: Sequence[dict[str, Any]], mode: str = "plain"
) -> list[ReplayCase]:
    """`cases_from_results` of a bench `results.json` (a list of records, or {"records": ...})."""
    data = json.loads(read_text(results))
    return cases_from_results(data["records"] if isinstance(data, dict) else data, tasks, mode)


def parse_traces(
    ap: argparse.ArgumentParser,
    argv: Sequence[str] | None = None,
) -> tuple[argparse.Namespace, Runtime, list[ReplayCase]]:
    """Parse a replay script's options (plus --results, --tasks, --mode, --model, --json) and
    load the recorded cases they name with the target's tokenizer (no weights are used).
    Exits 2 with one line when the results hold no such records."""
    ap.add_argument("--results", required=True, type=Path)
    ap.add_argument("--tasks", required=True, type=Path)
    ap.add_argument(
        "--mode",
        default="plain",
        help="the recorded mode whose output ids to replay (any greedy mode: the "
        "output does not depend on the draft length)",
    )
    ap.add_argument("--model", default=DEMO_TARGET, help="the target whose tokenizer the run used")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    cases = cases_from_file(a.results, load_tasks(a.tasks), a.mode)
    if not cases:
        ap.exit(2, f"error: no {a.mode}-mode records with output_ids in {a.results}\n")
    tok = open_runtime(
        "llamacpp", resolve(a.model, progress=False), RuntimeSettings(n_ctx=512, threads=1)
    )
    return a, tok, cases


def mean_rows(draws: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """`replay_all` rows of several noise draws (same cases and policies, in the same order) as
    one: each task and policy's speedup is its mean over the draws."""
    out = []
    for i, row in enumerate(draws[0]):
        same = [d[i] for d in draws]
        if any((r["task_id"], r["policy"]) != (row["task_id"], row["policy"]) for r in same):
            raise ValueError("draws hold different cases or policies")
        sps = [r["speedup"] for r in same]
        out.append(
            {
                **row,
                "speedup": round(statistics.fmean(sps), 3) if all(sps) else None,
                "same_output": all(r["same_output"] for r in same),
            }
        )
    return out


def summarize_replay(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Median and worst speedup per policy, and how close each gets to the oracle."""
    out: dict[str, dict[str, Any]] = {}
    oracle = {r["task_id"]: r["speedup"] for r in rows if r["policy"] == "oracle"}
    for pol in dict.fromkeys(r["policy"] for r in rows):
        sp = [r["speedup"] for r in rows if r["policy"] == pol and r["speedup"]]
        vs = [
            r["speedup"] / oracle[r["task_id"]]
            for r in rows
            if r["policy"] == pol and r["speedup"] and oracle.get(r["task_id"])
        ]
        out[pol] = {
            "tasks": len(sp),
            "median": round(statistics.median(sp), 3) if sp else None,
            "worst": round(min(sp), 3) if sp else None,
            "of_oracle": round(statistics.median(vs), 3) if vs else None,
            "same_output": all(r["same_output"] for r in rows if r["policy"] == pol),
        }
    return out


__all__ = [
    "OneHotRows",
    "OraclePolicy",
    "ReplayCase",
    "ReplayRuntime",
    "VirtualClock",
    "World",
    "cases_from_file",
    "cases_from_results",
    "mean_rows",
    "parse_traces",
    "policy_for",
    "replay_all",
    "replay_case",
    "summarize_replay",
    "table_cost",
]

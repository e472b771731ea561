"""GPU check in minutes: the demo target's shape with random weights, no network, no model files.

On a CUDA machine with torch and transformers this script
1. builds a randomly initialised Qwen2 model from `data/qwen2.5-coder-1.5b-config.json` (bf16, cuda);
2. measures the verify-cost curve T(k) after a ~1024-token prefix, twice: argmax on the device
   (only k ids cross to the host) and the torch runtime's current path (k full float32 rows
   copied to the host, numpy argmax), so the host-side cost is visible;
3. runs the real `edge_spec.core.loop.generate` end to end (plain, adaptive, fixed K) over a
   `TorchRuntime` wrapping the random model, and checks speculative == plain greedy;
4. replays recorded CPU traces (per task, the runs of accepted draft tokens) on the measured
   curve to project tokens/s for plain, fixed K and an oracle;
5. writes a profile TOML named after the GPU (and `gpu_check.json` with every number) to --out.

`--device cpu --tiny` runs the same code on a 2-layer toy config in seconds (the CPU test).
Run `python benchmarks/gpu_check.py --help` for the options; docs/runtimes.md explains the output.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import glob
import inspect
import json
import math
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge_spec.bench.modes import read_text
from edge_spec.config.profiles import CostsSection, Profile, parse_profile
from edge_spec.config.settings import (
    REQUIRED_POINTS,
    ControllerSettings,
    DrafterSettings,
    RuntimeSettings,
)
from edge_spec.core.controller import Controller
from edge_spec.core.loop import GenConfig, GenResult, generate
from edge_spec.core.types import Reference
from edge_spec.drafters.reference import ReferenceDrafter
from edge_spec.runtimes.base import host_greedy
from edge_spec.runtimes.hf import TorchRuntime, set_attention
from edge_spec.runtimes.hf_exact import make_batch_invariant

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CONFIG = HERE / "data" / "qwen2.5-coder-1.5b-config.json"
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
    "bos_token_id": 998,
    "eos_token_id": 999,
}
FULL_GRID = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256)
SMOKE_GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256)
FIXED_KS = (16, 32, 64, 128)
# Token t is the character chr(_CHAR0 + t): a bijective "tokenizer" with no files, so the
# reference drafter's token and text matching both work on the random model's ids.
_CHAR0 = 0x10000


# ---- the model and the runtime ---------------------------------------------------------------


def build_model(args: argparse.Namespace) -> tuple[Any, str]:
    """(random Qwen2 model on the device, dtype name) from the shipped config (or --tiny)."""
    import torch
    import transformers

    cfg = json.loads(CONFIG.read_text(encoding="utf-8"))
    if args.tiny:
        cfg.update(TINY)
    if args.layers:
        cfg["num_hidden_layers"] = cfg["max_window_layers"] = args.layers
    cfg.pop("torch_dtype", None)
    # Older transformers choose attention kernels when the model is built, from the config.
    cfg.setdefault("attn_implementation", "sdpa" if args.device == "cuda" else "eager")
    config = transformers.Qwen2Config(**cfg)
    dtype_name = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    torch.manual_seed(args.seed)
    with torch.device(args.device):
        model = transformers.Qwen2ForCausalLM(config)
    model = model.to(dtype=getattr(torch, dtype_name)).eval()
    return model, dtype_name


class DeviceIds:
    """What a device-argmax eval returns: the ids, shaped like `logits.argmax(axis=1)`.

    `verify_greedy` only takes row argmaxes (`logits[i].argmax()`), so the real loop runs unchanged on it
    (greedy only) and shows the speed of verification on the device.
    """

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = ids
        self.shape = (len(ids), 0)

    def __len__(self) -> int:
        return len(self.ids)

    def argmax(self, axis: int = 1) -> np.ndarray:
        return self.ids

    def __getitem__(self, i: int) -> _DeviceId:
        return _DeviceId(int(self.ids[i]))


class _DeviceId:
    """One row's id: `verify_greedy` takes the argmax row by row, stopping at a mismatch."""

    def __init__(self, token: int) -> None:
        self.token = token

    def argmax(self) -> int:
        return self.token


class RandomTorchRuntime(TorchRuntime):
    """The torch runtime's eval/truncate (its own code) over an in-memory model, no tokenizer.

    Only `__init__` and the text side differ from `TorchRuntime`; with `device_argmax` the
    verify rows' argmax runs on the device and only the ids are copied to the host.
    """

    def __init__(self, model: Any, n_ctx: int, n_batch: int = 512) -> None:  # noqa: D107
        import torch

        self._torch = torch
        self.model = model
        self.device = next(model.parameters()).device
        cuda = self.device.type == "cuda"
        # As TorchRuntime does: bit-identical windows on CPU, SDPA for speed on CUDA.
        self.batch_invariant = not cuda and make_batch_invariant(model)
        if not self.batch_invariant:
            set_attention(model, "sdpa" if cuda else "eager")
        self.name, self.path, self.options = "random-qwen2", None, RuntimeSettings()
        self.n_vocab = int(model.config.vocab_size)
        self.n_ctx, self.n_batch = n_ctx, n_batch
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._rows_kw = True  # every transformers with Qwen2 and DynamicCache.crop has it
        self._cache = self._new_cache()
        self._tokens: list[int] = []
        self._eog: frozenset[int] = frozenset()  # random weights: never stop early
        self.device_argmax = False

    def _forward(self, chunk: list[int], rows: list[int]) -> Any:
        if not self.device_argmax or not rows:
            return super()._forward(chunk, rows)
        torch = self._torch
        ids = torch.tensor([chunk], dtype=torch.long, device=self.device)
        keep = torch.tensor(rows, dtype=torch.long, device=self.device)
        kw: dict[str, Any] = {self._cache_kw: self._cache, "use_cache": True}
        with torch.inference_mode():
            res = self.model(input_ids=ids, logits_to_keep=keep, **kw)
            best = res.logits[0].argmax(dim=-1)
        if (
            self._cache_kw == "past_key_values"
            and getattr(res, "past_key_values", None) is not None
        ):
            self._cache = res.past_key_values
        self._tokens.extend(chunk)
        return DeviceIds(best.cpu().numpy())  # .cpu() waits for the device: k ids only

    def greedy(self, tokens: Sequence[int], banned: Any = None) -> list[int]:
        """Device mode: the torch runtime's own on-device verify; host mode: full rows copied
        to the host and the argmax taken there (what the loop costs without device verify)."""
        if self.device_argmax:
            return super().greedy(tokens, banned)
        return host_greedy(self.eval(tokens, rows=range(len(tokens))), tokens[1:], banned)

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = True) -> list[int]:
        return [ord(c) - _CHAR0 for c in text if 0 <= ord(c) - _CHAR0 < self.n_vocab]

    def token_bytes(self, token: int) -> bytes:
        return chr(_CHAR0 + token).encode("utf-8")

    def detokenize(self, tokens: Sequence[int]) -> str:
        return "".join(chr(_CHAR0 + t) for t in tokens)


def sync(rt: RandomTorchRuntime) -> None:
    if rt.device.type == "cuda":
        rt._torch.cuda.synchronize()


def timed(rt: RandomTorchRuntime, fn: Callable[[], Any]) -> tuple[float, Any]:
    """(ms, result) of fn with the device synchronised before and after."""
    sync(rt)
    t0 = time.perf_counter()
    out = fn()
    sync(rt)
    return (time.perf_counter() - t0) * 1e3, out


# ---- 2. the verify-cost curve ----------------------------------------------------------------


def measure_prefill(rt: RandomTorchRuntime, prefix: list[int]) -> float:
    """ms per token of evaluating `prefix` from an empty cache (no logits), after a warm-up."""
    rt.truncate(0)
    rt.eval(prefix[:64], rows=[])  # warm-up: kernels, allocator
    rt.truncate(0)
    ms, _ = timed(rt, lambda: rt.eval(prefix, rows=[]))
    return ms / len(prefix)


def measure_curve(
    rt: RandomTorchRuntime,
    prefix: list[int],
    grid: Sequence[int],
    repeats: int,
    rng: np.random.Generator,
) -> dict[str, dict[int, float]]:
    """Median ms of one k-token verify after `prefix`: device argmax, host copy + numpy argmax.

    `host_argmax` is the numpy argmax alone (part of `host`).
    """
    rt.truncate(0)
    rt.eval(prefix, rows=[])
    base = rt.n_tokens
    curve: dict[str, dict[int, float]] = {"device": {}, "host": {}, "host_argmax": {}}
    for k in grid:
        toks = [int(t) for t in rng.integers(0, rt.n_vocab, k)]
        samples: dict[str, list[float]] = {key: [] for key in curve}
        for rep in range(repeats + 1):  # the first of each size is a warm-up
            for device in (True, False):
                rt.device_argmax = device
                ms, out = timed(rt, functools.partial(rt.eval, toks, rows=range(k)))
                if not device:
                    t0 = time.perf_counter()
                    np.asarray(out).argmax(axis=1)
                    argmax_ms = (time.perf_counter() - t0) * 1e3
                    ms += argmax_ms
                    if rep:
                        samples["host_argmax"].append(argmax_ms)
                if rep:
                    samples["device" if device else "host"].append(ms)
                rt.truncate(base)
        for key, vals in samples.items():
            curve[key][k] = statistics.median(vals)
    rt.device_argmax = False
    return curve


def batch_noise(rt: RandomTorchRuntime, tokens: list[int], window: int = 16) -> float:
    """Max |logit| difference between one window in one forward and the same tokens one by one.

    The tolerance for a greedy divergence (docs/design.md, "Lossless"): bf16 kernels on CUDA are not
    batch-invariant, so a top-2 gap below this may flip between plain and speculative decoding.
    """
    head, tail = tokens[:-window], tokens[-window:]
    rt.truncate(0)
    rt.eval(head, rows=[])
    single = np.concatenate([np.array(rt.eval([t]), dtype=np.float32) for t in tail])
    rt.truncate(len(head))
    batch = np.array(rt.eval(tail, rows=range(window)), dtype=np.float32)
    rt.truncate(0)
    return float(np.abs(single - batch).max())


# ---- 3. the real loop end to end -------------------------------------------------------------


@dataclass
class RunResult:
    scenario: str
    verify: str  # device | host
    mode: str  # plain | adaptive | fixed-K
    tokens: list[int] = field(repr=False)
    decode_ms: float
    forwards: int
    verdict: str = ""

    @property
    def tok_s(self) -> float:
        return len(self.tokens) / (self.decode_ms / 1e3) if self.decode_ms else 0.0

    def row(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "verify": self.verify,
            "mode": self.mode,
            "tokens": len(self.tokens),
            "decode_ms": round(self.decode_ms, 2),
            "tok_s": round(self.tok_s, 1),
            "target_forwards": self.forwards,
            "tokens_per_forward": round(len(self.tokens) / max(self.forwards, 1), 2),
            "verdict": self.verdict,
        }


def run_mode(
    rt: RandomTorchRuntime,
    prompt: list[int],
    mode: str,
    n_new: int,
    verify_ms: dict[int, float],
    refs: Sequence[Reference],
) -> GenResult:
    """One generation with the real loop; the controller starts from the measured curve."""
    rt.truncate(0)  # a fresh request each time, so every mode pays the same prefill
    ctl = Controller(ControllerSettings(k_max=max(verify_ms) - 1, verify_ms=verify_ms))
    fixed = int(mode.removeprefix("fixed-")) if mode.startswith("fixed-") else None
    drafters = [] if mode == "plain" else [ReferenceDrafter(rt)]
    return generate(
        rt, prompt, drafters, ctl, GenConfig(max_tokens=n_new, fixed_k=fixed), references=refs
    )


def judge(
    plain: list[int], spec: list[int], gap_at: Callable[[int, int, int], float], noise: float
) -> str:
    """identical, near-tie (first divergence within the batch noise), or FAIL."""
    if spec == plain:
        return "identical"
    i = next(
        (j for j, (a, b) in enumerate(zip(plain, spec, strict=False)) if a != b),
        min(len(plain), len(spec)),
    )
    if i >= min(len(plain), len(spec)):
        return f"FAIL: lengths {len(plain)} vs {len(spec)}"
    gap = gap_at(i, plain[i], spec[i])
    verdict = f"near-tie at {i} (gap {gap:.4f} <= noise {noise:.4f})"
    return verdict if gap <= noise else f"FAIL: diverged at {i} (gap {gap:.4f} > {noise:.4f})"


def check(
    rt: RandomTorchRuntime, prompt: list[int], plain: list[int], spec: list[int], noise: float
) -> str:
    """judge() with the top-2 gap recomputed from full logits (host path, one batched forward)."""

    def gap_at(i: int, a: int, b: int) -> float:
        rt.truncate(0)
        row = np.asarray(rt.eval(prompt + plain[:i]), dtype=np.float32)[0]
        rt.truncate(0)
        return float(abs(row[a] - row[b]))

    saved, rt.device_argmax = rt.device_argmax, False
    try:
        return judge(plain, spec, gap_at, noise)
    finally:
        rt.device_argmax = saved


def end_to_end(
    rt: RandomTorchRuntime,
    args: argparse.Namespace,
    verify_ms: dict[int, float],
    noise: float,
    rng: np.random.Generator,
) -> list[RunResult]:
    """Plain, adaptive and fixed-64 generations in two scenarios, with device and host verify.

    oracle: the reference is the plain greedy output itself (the ceiling of a perfect draft);
    repeat: a prompt made of one block repeated, the reference drafter copying from the prompt.
    """
    n_new, plen = args.new_tokens, args.prompt_tokens
    block = [int(t) for t in rng.integers(0, rt.n_vocab, 64)]
    prompts = {
        "oracle": [int(t) for t in rng.integers(0, rt.n_vocab, plen)],
        "repeat": (block * (plen // 64 + 1))[:plen],
    }
    results: list[RunResult] = []
    for scenario, prompt in prompts.items():
        for verify in ("device", "host"):
            rt.device_argmax = verify == "device"
            base = run_mode(rt, prompt, "plain", n_new, verify_ms, ())
            plain = RunResult(
                scenario,
                verify,
                "plain",
                base.tokens,
                base.stats.decode_ms,
                base.stats.target_forwards,
                "reference",
            )
            results.append(plain)
            refs = [Reference(rt.detokenize(base.tokens))] if scenario == "oracle" else []
            for mode in ("adaptive", f"fixed-{args.fixed_k}"):
                res = run_mode(rt, prompt, mode, n_new, verify_ms, refs)
                verdict = check(rt, prompt, base.tokens, res.tokens, noise)
                results.append(
                    RunResult(
                        scenario,
                        verify,
                        mode,
                        res.tokens,
                        res.stats.decode_ms,
                        res.stats.target_forwards,
                        verdict,
                    )
                )
    rt.device_argmax = False
    return results


# ---- 4. replay of recorded CPU traces --------------------------------------------------------


def runs_from_steps(ks: Sequence[int], accepted: Sequence[int]) -> list[int]:
    """Accepted runs from recorded steps: a fully accepted step continues the run into the next.

    A run r means the draft was right for r tokens, then the target's token differed: r + 1
    tokens of output. Runs cut by the recorded k are lower bounds of the drafter's true runs.
    """
    runs, cur = [], 0
    for k, a in zip(ks, accepted, strict=True):
        if k and a == k:
            cur += a + 1
            continue
        runs.append(cur + a)
        cur = 0
    if cur:
        runs.append(cur - 1)
    return runs


def runs_of_record(rec: dict[str, Any]) -> tuple[list[int], str] | None:
    """(runs, how) from one bench record, or None when it holds no per-step acceptance."""
    if "runs" in rec:
        return [int(r) for r in rec["runs"]], "runs"
    steps = rec.get("steps")
    if isinstance(steps, list) and steps and isinstance(steps[0], dict) and "accepted" in steps[0]:
        return runs_from_steps([s["k"] for s in steps], [s["accepted"] for s in steps]), "steps"
    if "accepted_trace" in rec and "k_trace" in rec:
        return runs_from_steps(rec["k_trace"], rec["accepted_trace"]), "steps"
    hist = rec.get("accepted_hist")
    if isinstance(hist, dict) and rec.get("target_forwards"):
        # Older bench files: only a histogram of accepted counts per drafting step. Each step
        # counts as its own run (cut at its k), and steps without a draft as runs of 0.
        runs = [int(a) for a, n in hist.items() for _ in range(int(n))]
        return runs + [0] * (int(rec["target_forwards"]) - len(runs)), "accepted_hist (approx)"
    return None


def load_traces(paths: Sequence[str]) -> dict[str, tuple[list[int], str]]:
    """task id -> (runs, how), from trace JSON files or bench results.json files.

    Accepted shapes: {"tasks": {id: [runs]}} or {id: [runs]}; a list of bench records (one per
    task and mode: the spec-adaptive record is preferred, then any spec mode).
    """
    out: dict[str, tuple[list[int], str]] = {}
    rank: dict[str, int] = {}
    for path in paths:
        data = json.loads(read_text(path))
        if isinstance(data, dict):
            tasks = data.get("tasks", data)
            for tid, runs in tasks.items():
                if isinstance(runs, list):
                    out[str(tid)] = ([int(r) for r in runs], "runs")
                    rank[str(tid)] = 0
            continue
        for rec in data if isinstance(data, list) else []:
            mode = str(rec.get("mode", ""))
            if not mode.startswith("spec") or rec.get("repeat", 0):
                continue
            got = runs_of_record(rec)
            r = (0 if got and got[1] != "accepted_hist (approx)" else 2) + (mode != "spec-adaptive")
            if got and r < rank.get(rec["task_id"], 99):
                out[rec["task_id"]], rank[rec["task_id"]] = got, r
    return out


def cost(curve: dict[int, float], n: int) -> float:
    """T(n) by linear interpolation of the measured curve, extrapolated past its ends."""
    xs = sorted(curve)
    if n <= xs[-1]:
        return float(np.interp(n, xs, [curve[x] for x in xs]))
    (x0, x1), (y0, y1) = xs[-2:], (curve[xs[-2]], curve[xs[-1]])
    return y1 + (y1 - y0) / (x1 - x0) * (n - x1)


def fixed_price(runs: Sequence[int], curve: dict[int, float], k: int) -> float:
    """ms of decoding these runs drafting k tokens every step (k = 0: plain decoding).

    Within a run of r each step yields k + 1 tokens until the run's r + 1 tokens are out; a
    step pays for its k drafted tokens whether or not they are right.
    """
    t = cost(curve, k + 1)
    return sum(math.ceil((r + 1) / (k + 1)) * t for r in runs)


def oracle_price(runs: Sequence[int], curve: dict[int, float], k_max: int) -> float:
    """ms of the oracle: it knows each run and splits its r + 1 tokens into the cheapest steps.

    best[n] = min over j <= k_max + 1 of best[n - j] + T'(j) (one run is usually one step, but a
    curve with a step in it can make two shorter verifies cheaper), where T'(j) is the cheapest
    verify of j or more tokens: on a curve that is not monotone, drafting past the run pays.
    """
    top = max(runs, default=0) + 1
    sizes = range(1, k_max + 2)
    t = np.minimum.accumulate(np.array([cost(curve, j) for j in sizes])[::-1])[::-1]
    t = np.concatenate([[np.inf], t[:top]])
    best = np.zeros(top + 1)
    for n in range(1, top + 1):
        j = np.arange(1, min(n, len(t) - 1) + 1)
        best[n] = float(np.min(best[n - j] + t[j]))
    return float(sum(best[r + 1] for r in runs))


def replay(
    traces: dict[str, tuple[list[int], str]], curve: dict[int, float], k_max: int
) -> list[dict[str, Any]]:
    """Projected tokens/s per task: plain, each fixed K and the oracle on this curve."""
    rows = []
    for tid, (runs, how) in sorted(traces.items()):
        row: dict[str, Any] = {"task": tid, "trace": how}
        tokens = sum(r + 1 for r in runs)
        prices = {
            "plain": fixed_price(runs, curve, 0),
            **{f"fixed-{k}": fixed_price(runs, curve, k) for k in FIXED_KS},
            "oracle": oracle_price(runs, curve, k_max),
        }
        for name, ms in prices.items():
            row[name] = round(tokens / (ms / 1e3), 1) if ms else 0.0
        row["tokens"] = tokens
        rows.append(row)
    return rows


# ---- 5. the profile --------------------------------------------------------------------------


def device_name(device: str) -> str:
    import torch

    if device == "cuda":
        return str(torch.cuda.get_device_name(0))
    return "cpu"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def make_profile(
    name: str,
    machine: str,
    curve: dict[int, float],
    prefill_ms: float,
    args: argparse.Namespace,
    dtype: str,
    layers: int,
) -> Profile:
    """A measured profile for the torch runtime on this device, from the device-argmax curve."""
    missing = [n for n in REQUIRED_POINTS if n not in curve]
    assert not missing, f"curve lacks required points {missing}"
    method = (
        f"benchmarks/gpu_check.py: random-weight Qwen2 with the demo target's config "
        f"({layers} layers, {dtype}, {'tiny test config, ' if args.tiny else ''}"
        f"torch {'SDPA' if args.device == 'cuda' else 'eager'}), median of "
        f"{args.repeats} verifies of n tokens after a {args.prefix}-token prefix, logits "
        f"for the n rows only, argmax on the device. drafter_ratio not measured (the "
        f"0.5B drafter is not built here): the rtx4090 roofline estimate."
    )
    costs = CostsSection(
        verify_ms={n: round(ms, 4) for n, ms in sorted(curve.items())},
        drafter_ratio=0.735,
        prefill_ms_per_token=max(prefill_ms, 1e-4),
        source="measured",
        machine=machine,
        date=dt.date.today().isoformat(),
        method=method,
        target="qwen2.5-coder-1.5b-instruct (random weights)",
    )
    runtime = RuntimeSettings(
        backend="torch",
        n_gpu_layers=-1 if args.device == "cuda" else 0,
        dtype=dtype,
        n_ctx=16384,
        n_batch=512,
    )
    return Profile(
        name=name,
        costs=costs,
        runtime=runtime,
        description=f"{machine}, torch runtime {dtype}, measured by gpu_check.py",
        drafter=DrafterSettings(kind="hybrid"),
        controller=ControllerSettings(k_max=min(max(curve) - 1, 255)),
    )


# ---- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--dtype", default="", help="default: bfloat16 on cuda, float32 on cpu")
    p.add_argument("--smoke", action="store_true", help="fewer sizes and repeats (< 1 min)")
    p.add_argument("--tiny", action="store_true", help="toy config (2 layers, hidden 64)")
    p.add_argument("--layers", type=int, default=0, help="override num_hidden_layers")
    p.add_argument("--repeats", type=int, default=0, help="timed repeats per size")
    p.add_argument("--prefix", type=int, default=1024, help="tokens in the KV cache before T(k)")
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--new-tokens", type=int, default=0, help="tokens generated end to end")
    p.add_argument("--fixed-k", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--grid", default="", help="verify sizes, e.g. 1,2,4,8,16,32,64,128")
    p.add_argument(
        "--traces",
        nargs="*",
        default=None,
        help="trace or bench results.json[.gz] files (default: every results.json.gz "
        "and traces*.json.gz under benchmarks/results)",
    )
    p.add_argument("--out", default=str(HERE / "gpu-out"))
    args = p.parse_args(argv)
    args.repeats = args.repeats or (2 if args.smoke else 5)
    args.new_tokens = args.new_tokens or (64 if args.smoke else 256)
    grid = tuple(int(x) for x in args.grid.split(",") if x) if args.grid else ()
    args.grid = tuple(sorted(set(grid or (SMOKE_GRID if args.smoke else FULL_GRID))))
    missing = [n for n in REQUIRED_POINTS if n not in args.grid]
    if missing:
        p.error(f"--grid needs the profile's required points; missing {missing}")
    if args.traces is None:
        args.traces = sorted(
            {
                *glob.glob(str(HERE / "results" / "*" / "results.json.gz")),
                *glob.glob(str(HERE / "results" / "*" / "traces*.json.gz")),
            }
        )
    return args


def print_report(report: dict[str, Any]) -> None:
    """The numbers a person reads; gpu_check.json has them all."""
    print(f"\n== {report['machine']}  ({report['layers']} layers, {report['dtype']})")
    print(
        f"prefill {report['prefill_ms_per_token']:.3f} ms/token; batch-vs-single logits "
        f"noise {report['batch_noise']:.4g}"
    )
    print(f"{'k':>5} {'device ms':>10} {'host ms':>9} {'argmax ms':>10} {'host extra':>10}")
    c = report["curve"]
    for k in c["device"]:
        print(
            f"{k:>5} {c['device'][k]:>10.3f} {c['host'][k]:>9.3f} "
            f"{c['host_argmax'][k]:>10.3f} {c['host'][k] - c['device'][k]:>10.3f}"
        )
    print(f"\n{'scenario':<8} {'verify':<7} {'mode':<9} {'tok/s':>8} {'tok/fwd':>8}  verdict")
    for r in report["end_to_end"]:
        print(
            f"{r['scenario']:<8} {r['verify']:<7} {r['mode']:<9} {r['tok_s']:>8.1f} "
            f"{r['tokens_per_forward']:>8.2f}  {r['verdict']}"
        )
    rows = report["replay"]
    if rows:
        cols = ["plain", *(f"fixed-{k}" for k in FIXED_KS), "oracle"]
        print(f"\nreplay on the device curve (projected tok/s), {len(rows)} tasks")
        print(f"{'task':<26}" + "".join(f"{c:>10}" for c in cols) + "  trace")
        for r in rows:
            print(f"{r['task']:<26}" + "".join(f"{r[c]:>10.1f}" for c in cols) + f"  {r['trace']}")
        print(
            f"{'median':<26}"
            + "".join(f"{statistics.median(r[c] for r in rows):>10.1f}" for c in cols)
        )
    print(f"\nprofile: {report['profile_path']}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "gpu_check: no CUDA device visible to torch (use --device cpu --tiny to try it "
            "on a CPU)",
            file=sys.stderr,
        )
        return 2
    rng = np.random.default_rng(args.seed)
    model, dtype = build_model(args)
    n_ctx = args.prefix + max(args.grid) + args.prompt_tokens + args.new_tokens + 64
    rt = RandomTorchRuntime(model, n_ctx=n_ctx)
    prefix = [int(t) for t in rng.integers(0, rt.n_vocab, args.prefix)]
    prefill = measure_prefill(rt, prefix)
    curve = measure_curve(rt, prefix, args.grid, args.repeats, rng)
    noise = batch_noise(rt, prefix[:256])
    results = end_to_end(rt, args, curve["device"], noise, rng)
    machine = device_name(args.device)
    layers = int(model.config.num_hidden_layers)
    name = slug(
        f"{machine}-torch-{'bf16' if dtype == 'bfloat16' else dtype}"
        + ("-tiny" if args.tiny else "")
        + (f"-{layers}l" if args.layers else "")
    )
    profile = make_profile(name, machine, curve["device"], prefill, args, dtype, layers)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.toml"
    path.write_text(profile.to_toml(), encoding="utf-8")
    parse_profile(path.read_text(encoding="utf-8"), path)  # what we write must load
    traces = load_traces(args.traces)
    report = {
        "machine": machine,
        "dtype": dtype,
        "layers": layers,
        "smoke": args.smoke,
        "tiny": args.tiny,
        "prefix": args.prefix,
        "repeats": args.repeats,
        "prefill_ms_per_token": prefill,
        "batch_noise": noise,
        "curve": curve,
        "end_to_end": [r.row() for r in results],
        "replay": replay(traces, curve["device"], k_max=max(args.grid) - 1),
        "replay_host": replay(traces, curve["host"], k_max=max(args.grid) - 1),
        "trace_files": [
            str(Path(p).resolve().relative_to(REPO))
            if Path(p).resolve().is_relative_to(REPO)
            else p
            for p in args.traces
        ],
        "profile_path": str(path),
        "profile_name": name,
    }
    report["ok"] = all(not r.verdict.startswith("FAIL") for r in results)
    report["wall_s"] = round(time.perf_counter() - t_start, 1)
    (out / "gpu_check.json").write_text(
        json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8"
    )
    print_report(report)
    print(
        f"{'OK' if report['ok'] else 'FAILED'}: speculative == plain greedy "
        f"({sum(r.mode != 'plain' for r in results)} runs); {report['wall_s']} s"
    )
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""Every family the exporter claims, proven on a random-init tiny checkpoint of that family.

Per family: HF -> GGUF f32 and Q8_0 (llama.cpp) and ONNX fp32 (onnxruntime-genai's builder);
the torch, llama.cpp and onnxruntime runtimes load them; greedy tokens of the GGUF f32 and the
ONNX fp32 equal the HF model's on a fixed prompt, or part at a proven near-tie; speculative
decoding on each runtime equals its plain decoding. A family a pinned exporter cannot handle is
a one-line error naming it and its version.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import numpy as np
import openai
import pytest
from tiny_models import FAMILIES, QWEN_FAMILIES, build_tiny, tokenizer_from_gguf

from edge_spec.bench.neartie import divergence
from edge_spec.config.settings import ServerSettings
from edge_spec.core.chat import text_tokens
from edge_spec.core.loop import GenConfig
from edge_spec.engine import Engine, EngineConfig, build_engine
from edge_spec.errors import UserError
from edge_spec.runtimes import RuntimeOptions, open_runtime
from edge_spec.server.app import create_app
from edge_spec.server.serving import make_server

pytest.importorskip("transformers")
pytest.importorskip("llama_cpp")

PROMPT = "def merge_sorted(a, b):\n    result = []\n    i = j = 0\n"
N_GREEDY = 16
N_SPEC = 24
OPTS = RuntimeOptions(n_ctx=256, n_batch=256, threads=2, dtype="float32")


@pytest.fixture(scope="session")
def tokenizers(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from edge_spec.store.models import resolve

    root = tmp_path_factory.mktemp("tok")
    qwen = resolve("qwen2.5-coder-0.5b-instruct", progress=False)
    return {
        "smol": tokenizer_from_gguf(smollm2_path, root / "smol"),
        "qwen": tokenizer_from_gguf(qwen, root / "qwen"),
    }


def tiny(
    model_type: str, tokenizers: dict[str, Path], root: Path, seed: int = 0, vocab: str = ""
) -> Path:
    """The family's tiny checkpoint, with its usual vocabulary unless `vocab` names one."""
    tok = tokenizers[vocab or ("qwen" if model_type in QWEN_FAMILIES else "smol")]
    return build_tiny(model_type, tok, root / f"{model_type}-{seed}", seed=seed)


def greedy(rt, ids: list[int], n: int = N_GREEDY) -> list[int]:  # noqa: ANN001
    rt.truncate(0)
    out: list[int] = []
    logits = rt.eval(ids)
    while len(out) < n:
        out.append(int(np.argmax(logits[-1])))
        logits = rt.eval(out[-1:])
    return out


def agree_or_near_tie(
    ref,
    ref_toks: list[int],
    other,
    other_toks: list[int],  # noqa: ANN001
    ids: list[int],
    what: str,
) -> str:
    """Same greedy tokens, or at the first difference the reference's two candidates are closer
    than twice the largest logit difference of the two runtimes there (so either could win)."""
    i = next((k for k, (a, b) in enumerate(zip(ref_toks, other_toks, strict=True)) if a != b), None)
    if i is None:
        return f"{what}: {len(ref_toks)} tokens equal"
    seq = ids + ref_toks[:i]
    ref.truncate(0)
    other.truncate(0)
    r = np.asarray(ref.eval(seq)[-1], dtype=np.float64)
    o = np.asarray(other.eval(seq)[-1], dtype=np.float64)
    width = min(r.size, o.size)
    noise = float(np.abs(r[:width] - o[:width]).max())
    gap = float(r[ref_toks[i]] - r[other_toks[i]])
    assert gap <= 2 * noise, (what, i, gap, noise, ref_toks, other_toks)
    return f"{what}: near-tie at token {i} (gap {gap:.5f} <= 2 x noise {noise:.5f})"


def spec_equals_plain(target, drafter, ids: list[int], what: str) -> str:  # noqa: ANN001
    engine = Engine(target, drafter, EngineConfig().override(kind="model", n_ctx=OPTS.n_ctx))
    plain = engine.run_tokens(ids, GenConfig(N_SPEC), draft="none").tokens
    spec = engine.run_tokens(ids, GenConfig(N_SPEC, fixed_k=4), draft="model")
    if spec.tokens == plain:
        return f"{what}: spec == plain ({len(plain)} tokens, accepted {spec.stats.accepted})"
    d = divergence(target, ids, plain, spec.tokens)
    assert d is not None and d.near_tie, (what, d, plain, spec.tokens)
    return f"{what}: spec parts from plain at a near-tie {d}"


@pytest.mark.real
@pytest.mark.parametrize("model_type", list(FAMILIES))
def test_family_round_trip(
    model_type: str, tokenizers: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from edge_spec.export.hf_to_gguf import hf_to_gguf
    from edge_spec.export.onnx import BUILDER_GAPS, builder_version, export_onnx
    from edge_spec.export.quantize import quantize_gguf

    hf = tiny(model_type, tokenizers, tmp_path)
    f32 = hf_to_gguf(hf, tmp_path / "f32.gguf", "f32")
    q8 = quantize_gguf(f32, tmp_path / "q8_0.gguf", "Q8_0", threads=2)
    report: list[str] = []
    torch_rt = open_runtime("torch", hf, OPTS)
    ids = text_tokens(torch_rt, PROMPT)
    ref = greedy(torch_rt, ids)
    runtimes = {"llama.cpp f32": open_runtime("llamacpp", f32, OPTS)}
    if model_type in BUILDER_GAPS:
        with pytest.raises(UserError) as err:
            export_onnx(hf, tmp_path / "onnx", "fp32")
        line = str(err.value)
        assert f"onnxruntime-genai {builder_version()}" in line and model_type in line
        assert "\n" not in line and not (tmp_path / "onnx").exists()
        report.append(f"onnx: refused ({line})")
    else:
        onnx = export_onnx(hf, tmp_path / "onnx", "fp32")
        runtimes["onnx fp32"] = open_runtime("ort", onnx, OPTS)
    for name, rt in runtimes.items():
        assert text_tokens(rt, PROMPT) == ids, name  # one tokenizer, seen alike by every runtime
        report.append(agree_or_near_tie(torch_rt, ref, rt, greedy(rt, ids), ids, name))
    drafters = {
        "llama.cpp f32": open_runtime("llamacpp", q8, OPTS),
        "onnx fp32": runtimes.get("onnx fp32") and open_runtime("ort", tmp_path / "onnx", OPTS),
    }
    report.append(spec_equals_plain(torch_rt, open_runtime("torch", hf, OPTS), ids, "torch"))
    for name, rt in runtimes.items():
        report.append(spec_equals_plain(rt, drafters[name], ids, name))
    with capsys.disabled():
        print(f"\n[{model_type}] " + "; ".join(report))


# ---- Qwen3: pairs, bundle, run -----------------------------------------------------------------


def _cli(*args: str):  # noqa: ANN202
    from click.testing import CliRunner

    from edge_spec.cli.main import main

    return CliRunner().invoke(main, list(args))


@pytest.mark.real
def test_qwen3_pair_bundle_and_run(tokenizers: dict[str, Path], tmp_path: Path) -> None:
    """A Qwen3 target and a smaller Qwen3 drafter (one vocabulary) pair; a Llama with another
    vocabulary is refused with the reason; the exported bundle records architecture and
    converter, and `edge-spec run --bundle` decodes it speculatively exactly as plainly.

    The plumbing is what is under test here (the Qwen3 family with Qwen's own vocabulary is
    proven by its round trip above), so the pair takes SmolLM2's vocabulary, a third of the
    size, and the Llama that must be refused takes Qwen's."""
    import json

    target = tiny("qwen3", tokenizers, tmp_path, vocab="smol")
    drafter = build_tiny(
        "qwen3",
        tokenizers["smol"],
        tmp_path / "qwen3-drafter",
        seed=1,
        num_hidden_layers=1,
        hidden_size=32,
        intermediate_size=64,
    )
    other = tiny("llama", tokenizers, tmp_path, vocab="qwen")
    pair = _cli("inspect", str(target), str(drafter), "--json")
    assert pair.exit_code == 0, pair.output
    assert json.loads(pair.stdout)["pairing"]["pairs"] is True
    bad = _cli("inspect", str(target), str(other))
    assert bad.exit_code == 2 and "cannot draft for" in bad.stderr and "differ" in bad.stderr
    refused = _cli(
        "export", str(target), "--drafter", str(other), "--out", str(tmp_path / "nope"), "-q"
    )
    assert refused.exit_code == 2 and "stage 'pair'" in refused.stderr
    assert "does not pair" in refused.stderr and not (tmp_path / "nope").exists()

    out = tmp_path / "bundle"
    res = _cli(
        "export",
        str(target),
        "--drafter",
        str(drafter),
        "--format",
        "gguf,onnx",
        "--target-quant",
        "F32",
        "--drafter-quant",
        "Q8_0",
        "--onnx-quant",
        "none",
        "--threads",
        "2",
        "--out",
        str(out),
        "--json",
        "-q",
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    for f in d["files"]:
        if f["format"] == "gguf":
            assert f["architecture"] == "qwen3" and "edge-spec hf_to_gguf" in f["converter"], f
            assert ("llama-cpp-python" in f["converter"]) == (f["quant"] == "Q8_0"), f
        elif f["format"] == "onnx":
            assert f["architecture"] == "qwen3" and "onnxruntime-genai" in f["converter"], f
    assert all(c["agreement"] == 1.0 for c in d["checks"] if c["role"] == "target"), d["checks"]
    for runtime in ("llamacpp", "ort"):
        texts = {}
        for draft in ("none", "model"):
            run = _cli(
                "run",
                "--bundle",
                str(out),
                "--runtime",
                runtime,
                "--prompt",
                PROMPT,
                "--no-chat",
                "--draft",
                draft,
                "--max-tokens",
                "24",
                "--threads",
                "2",
                "--json",
            )
            assert run.exit_code == 0, (runtime, draft, run.output)
            texts[draft] = json.loads(run.stdout)["text"]
        assert texts["model"] == texts["none"] and texts["none"], (runtime, texts)
        # `--model BUNDLE` names the same pair as `--bundle BUNDLE`
        run = _cli(
            "run",
            "--model",
            str(out),
            "--runtime",
            runtime,
            "--prompt",
            PROMPT,
            "--no-chat",
            "--max-tokens",
            "24",
            "--threads",
            "2",
            "--json",
        )
        assert run.exit_code == 0, (runtime, run.output)
        assert json.loads(run.stdout)["text"] == texts["none"], runtime
        if runtime == "llamacpp":
            assert _served(out, runtime) == texts["none"]


def _served(bundle: Path, runtime: str) -> str:
    """The bundle behind `edge-spec serve` (a real uvicorn socket), asked with the openai client."""
    engine = build_engine(str(bundle), runtime=runtime, threads=2)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = make_server(create_app(engine), ServerSettings(shutdown_grace_s=2), "warning")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        base = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        client = openai.OpenAI(base_url=base, api_key="none", max_retries=0, timeout=120)
        got = client.completions.create(model="qwen3", prompt=PROMPT, max_tokens=24, temperature=0)
        return got.choices[0].text
    finally:
        server.should_exit = True
        thread.join(10)

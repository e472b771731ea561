"""The embeddable Engine API on the fake runtime: streaming, cancellation, prefix reuse."""

from __future__ import annotations

import threading
import time

from edge_spec.engine import Engine, EngineConfig
from edge_spec.runtimes.fake import FakeRuntime
from edge_spec.runtimes.prefix import common_prefix

ORIG = "".join(f"def f{i}(x):\n    return x * {i}  # ✓ 漢字\n\n" for i in range(30))
UPD = "# ... existing code ...\ndef f3(x):\n    return x * 333  # ✓ 漢字\n# ... existing code ...\n"
MERGED = ORIG.replace("x * 3  #", "x * 333  #")


def engine(**kw) -> Engine:
    rt = FakeRuntime(follow="```\n" + MERGED + "```\n", n_ctx=16384, **kw)
    return Engine(rt, None, EngineConfig().override(kind="reference"))


def test_apply_and_stream_agree() -> None:
    eng = engine()
    res = eng.apply(ORIG, UPD, "make f3 multiply by 333", engine="model")
    assert res.text == MERGED
    assert res.stats.accepted > 0.8 * res.stats.output_tokens
    stream = eng.stream_apply(ORIG, UPD, "make f3 multiply by 333", engine="model")
    deltas = list(stream)
    assert "".join(deltas) == stream.result.raw
    assert stream.result.text == res.text and len(deltas) > 1
    assert all("\ufffd" not in d for d in deltas)


def test_second_apply_reuses_prefix() -> None:
    eng = engine()
    first = eng.apply(ORIG, UPD, engine="model")
    second = eng.apply(ORIG, UPD, engine="model")
    assert first.stats.cached_tokens == 0
    # the very prompt the cache holds: all of it was evaluated in a fresh prompt's shapes
    assert second.stats.cached_tokens == second.stats.prompt_tokens - 1
    assert second.text == first.text
    # another prompt sharing its head: reused in whole n_batch chunks, the rest evaluated as a
    # fresh prompt would be
    third = eng.apply(ORIG, UPD, "make f3 multiply by 333", engine="model")
    n_batch = eng.target.n_batch
    shared = common_prefix(first.extra["prompt"][:-1], third.extra["prompt"])
    assert third.stats.cached_tokens == shared // n_batch * n_batch > 0


def test_cancel_from_another_thread_then_reuse() -> None:
    eng = engine(latency_ms=(3.0, 0.0))
    stream = eng.stream_apply(ORIG, UPD, draft="none", engine="model")
    it = iter(stream)
    next(it)
    t0 = time.perf_counter()
    threading.Thread(target=stream.cancel).start()
    rest = list(it)
    elapsed = time.perf_counter() - t0
    assert stream.result.stats.finish_reason == "cancelled"
    assert len(rest) < 20 and elapsed < 1.0
    again = eng.apply(ORIG, UPD, engine="model")
    assert again.text == MERGED


def test_generate_and_stream_generate() -> None:
    eng = engine()
    res = eng.generate("def f1(x):\n", chat=False, max_tokens=40, references=[ORIG])
    stream = eng.stream_generate("def f1(x):\n", chat=False, max_tokens=40, references=[ORIG])
    assert "".join(stream) == res.text and stream.result.tokens == res.tokens


LAZY = (
    "def f0(x):\n    return x * 0  # ✓ 漢字\n\n# ... existing code (f1, f2) ...\n"
    "def f3(x):\n    return x * 333  # ✓ 漢字\n// ... rest of the file unchanged\n"
)


def lazy_engine() -> Engine:
    rt = FakeRuntime(follow="```\n" + LAZY + "```\n", n_ctx=16384)
    return Engine(rt, None, EngineConfig().override(kind="reference"))


def test_lazy_answer_is_flagged_and_policies_apply() -> None:
    # guard=False: the decode-time guard would prevent the lazy answer these policies handle.
    import pytest

    from edge_spec.errors import UserError

    eng = lazy_engine()
    kept = eng.apply(ORIG, UPD, engine="model", guard=False)
    assert kept.lazy_lines == [4, 7] and kept.fallback is None
    assert "existing code" in kept.text and "rest of the file" in kept.text
    naive = eng.apply(ORIG, UPD, on_lazy="naive", engine="model", guard=False)
    assert naive.fallback == "naive" and naive.text == MERGED and naive.lazy_lines == [4, 7]
    crlf = eng.apply(ORIG.replace("\n", "\r\n"), UPD, on_lazy="naive", engine="model", guard=False)
    assert crlf.text == MERGED.replace("\n", "\r\n")
    with pytest.raises(UserError, match=r"left 2 '... existing code ...' marker\(s\).*line 4, 7"):
        eng.apply(ORIG, UPD, on_lazy="error", engine="model", guard=False)
    with pytest.raises(UserError, match="unknown on_lazy"):
        eng.apply(ORIG, UPD, on_lazy="maybe", engine="model", guard=False)
    # An answer that copies a marker the original itself has is not lazy.
    assert engine().apply(ORIG, UPD, engine="model", guard=False).lazy_lines == []
    stream = eng.stream_apply(ORIG, UPD, engine="model", guard=False)
    assert "".join(stream) == stream.result.raw and stream.result.lazy_lines == [4, 7]


def test_cli_lazy_policies(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    import json

    from click.testing import CliRunner

    from edge_spec.cli.main import main

    monkeypatch.setattr("edge_spec.cli.run.build_engine", lambda *a, **k: lazy_engine())
    (tmp_path / "o.txt").write_text(ORIG, encoding="utf-8")
    (tmp_path / "u.txt").write_text(UPD, encoding="utf-8")
    args = [
        "run",
        "--original",
        str(tmp_path / "o.txt"),
        "--update",
        str(tmp_path / "u.txt"),
        "--engine",
        "model",
        "--no-guard",
    ]  # without the guard, the fake answer is lazy
    out = tmp_path / "m.py"
    res = CliRunner().invoke(main, [*args, "--out", str(out)])
    assert res.exit_code == 0 and out.read_text(encoding="utf-8") == MERGED
    assert "wrote the merge of the snippet" in res.stderr
    res = CliRunner().invoke(main, [*args, "--json", "--on-lazy", "keep"])
    d = json.loads(res.stdout)
    assert d["lazy_lines"] == [4, 7] and d["fallback"] is None
    # Kept as asked, but never presented as sure: the answer check flags the dropped code.
    assert res.exit_code == 3 and d["suspect"] and "looks wrong" in res.stderr
    res = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "e.py"), "--on-lazy", "error"])
    assert res.exit_code == 2 and not (tmp_path / "e.py").exists()
    assert res.stderr.count("\n") == 1 and "code would be lost" in res.stderr
    res = CliRunner().invoke(main, args)  # streamed: already on stdout, so exit 3 and a warning
    assert res.exit_code == 3 and "existing code" in res.stdout
    assert "the file printed above is incomplete" in res.stderr

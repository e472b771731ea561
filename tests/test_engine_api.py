"""The embeddable Engine API on the fake runtime: streaming, cancellation, prefix reuse."""

from __future__ import annotations

import threading
import time

from edge_spec.runtimes.fake import FakeRuntime

from edge_spec.engine import Engine, EngineConfig

ORIG = "".join(f"def f{i}(x):\n    return x * {i}  # ✓ 漢字\n\n" for i in range(30))
UPD = "# ... existing code ...\ndef f3(x):\n    return x * 333  # ✓ 漢字\n# ... existing code ...\n"
MERGED = ORIG.replace("x * 3  #", "x * 333  #")


def engine(**kw) -> Engine:
    rt = FakeRuntime(follow="```\n" + MERGED + "```\n", n_ctx=16384, **kw)
    return Engine(rt, None, EngineConfig(draft="reference"))


def test_apply_and_stream_agree() -> None:
    eng = engine()
    res = eng.apply(ORIG, UPD, "make f3 multiply by 333")
    assert res.text == MERGED
    assert res.stats.accepted > 0.8 * res.stats.output_tokens
    stream = eng.stream_apply(ORIG, UPD, "make f3 multiply by 333")
    deltas = list(stream)
    assert "".join(deltas) == stream.result.raw
    assert stream.result.text == res.text and len(deltas) > 1
    assert all("\ufffd" not in d for d in deltas)


def test_second_apply_reuses_prefix() -> None:
    eng = engine()
    first = eng.apply(ORIG, UPD)
    second = eng.apply(ORIG, UPD)
    assert first.stats.cached_tokens == 0
    assert second.stats.cached_tokens == second.stats.prompt_tokens - 1
    assert second.text == first.text


def test_cancel_from_another_thread_then_reuse() -> None:
    eng = engine(latency_ms=(3.0, 0.0))
    stream = eng.stream_apply(ORIG, UPD, draft="none")
    it = iter(stream)
    next(it)
    t0 = time.perf_counter()
    threading.Thread(target=stream.cancel).start()
    rest = list(it)
    elapsed = time.perf_counter() - t0
    assert stream.result.stats.finish_reason == "cancelled"
    assert len(rest) < 20 and elapsed < 1.0
    again = eng.apply(ORIG, UPD)
    assert again.text == MERGED


def test_generate_and_stream_generate() -> None:
    eng = engine()
    res = eng.generate("def f1(x):\n", chat=False, max_tokens=40, references=[ORIG])
    stream = eng.stream_generate("def f1(x):\n", chat=False, max_tokens=40, references=[ORIG])
    assert "".join(stream) == res.text and stream.result.tokens == res.tokens

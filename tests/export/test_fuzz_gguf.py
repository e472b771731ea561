"""Fuzz check_gguf with hypothesis: a mutated GGUF is accepted or refused with UserError, nothing else.

About 10 s by default. A longer run:
    EDGE_SPEC_FUZZ_EXAMPLES=200000 python -m pytest tests/export/test_fuzz_gguf.py -q
and for coverage-guided runs see tests/fuzz/atheris_gguf.py.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import load_fuzz

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

fz = load_fuzz("fuzz_gguf")
SAMPLE = fz.sample_gguf()
EXAMPLES = int(os.environ.get("EDGE_SPEC_FUZZ_EXAMPLES", "4000"))
N = len(SAMPLE)
# Values that sit on the bounds a parser gets wrong: sign bits, all-ones, the file size.
INTERESTING = [
    0,
    1,
    2,
    7,
    8,
    9,
    12,
    13,
    31,
    32,
    63,
    64,
    65,
    255,
    1024,
    1 << 20,
    2**31 - 1,
    2**31,
    2**32 - 1,
    2**32,
    2**63 - 1,
    2**63,
    2**64 - 1,
    N - 24,
    N,
    N + 1,
]

_pos = st.one_of(st.integers(0, N), st.integers(0, 600))  # weight the header start
MUTATION = st.one_of(
    st.tuples(st.just("flip"), _pos, st.integers(1, 255)),
    st.tuples(st.just("cut"), _pos),
    st.tuples(st.sampled_from(["put4", "put8"]), _pos, st.sampled_from(INTERESTING)),
    st.tuples(st.sampled_from(["put4", "put8"]), _pos, st.integers(0, 2**64 - 1)),
    st.tuples(st.just("insert"), _pos, st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), _pos, st.integers(1, 16)),
)


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fuzz_gguf_") as tmp:
        yield Path(tmp) / "mutant.gguf"


@settings(
    max_examples=EXAMPLES,
    deadline=1000,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(ops=st.lists(MUTATION, min_size=1, max_size=6))
@example(ops=[("put8", 16, 2**63)])  # kv count
@example(ops=[("put8", fz.value_offset(SAMPLE, "tokenizer.ggml.tokens") + 4, 2**63 - 1)])
@example(ops=[("cut", 25)])
def test_mutated_gguf_is_accepted_or_refused_cleanly(scratch: Path, ops: list) -> None:
    header = fz.check_bytes(fz.mutate(SAMPLE, ops), scratch)
    event("accepted" if header else "refused")  # shown by --hypothesis-show-statistics


def test_harness_accepts_the_unmutated_sample(scratch: Path) -> None:
    assert fz.check_bytes(SAMPLE, scratch) is not None

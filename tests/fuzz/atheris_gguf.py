"""Coverage-guided fuzzing of check_gguf with atheris (libFuzzer), for runs longer than CI's.

    pip install atheris
    python tests/fuzz/atheris_gguf.py -max_total_time=600 /tmp/gguf_corpus

The corpus folder is seeded with small valid GGUFs when empty; crashes land in ./crash-*.
Any input that raises something other than UserError, or breaks the header invariants in
fuzz_gguf.check_bytes, is a crash: turn it into a case in tests/export/test_validate.py.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for edge_spec
sys.path.insert(0, str(Path(__file__).resolve().parent))

with atheris.instrument_imports():
    import fuzz_gguf

    import edge_spec.store.validate  # noqa: F401 - instrumented for coverage

SCRATCH = Path(tempfile.mkdtemp(prefix="atheris_gguf_")) / "input.gguf"


def seed_corpus(folder: Path) -> None:
    """Write a few valid files into an empty corpus folder for libFuzzer to mutate."""
    folder.mkdir(parents=True, exist_ok=True)
    if any(folder.iterdir()):
        return
    (folder / "sample.gguf").write_bytes(fuzz_gguf.sample_gguf())
    (folder / "no-tensors.gguf").write_bytes(fuzz_gguf.build_gguf(tensors=[]))
    (folder / "align64-v2.gguf").write_bytes(
        fuzz_gguf.build_gguf(
            [*fuzz_gguf.KVS[:3], ("general.alignment", fuzz_gguf.U32, 64)], version=2
        )
    )


def test_one_input(data: bytes) -> None:
    fuzz_gguf.check_bytes(data, SCRATCH)


def main() -> None:
    folders = [a for a in sys.argv[1:] if not a.startswith("-")]
    if not folders:
        folders = [os.path.join(tempfile.gettempdir(), "gguf_corpus")]
        sys.argv.append(folders[0])
    seed_corpus(Path(folders[0]))
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

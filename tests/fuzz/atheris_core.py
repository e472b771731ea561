"""Coverage-guided fuzzing (atheris / libFuzzer) of the text stream, the reference drafter and
the profile loader, for runs longer than CI's hypothesis budget (tests/core/test_fuzz_core.py).

    pip install atheris            # or: pip install 'edge-spec[fuzz]'
    python tests/fuzz/atheris_core.py --target=stream    -max_total_time=600 /tmp/core_corpus_stream
    python tests/fuzz/atheris_core.py --target=reference -max_total_time=600 /tmp/core_corpus_ref
    python tests/fuzz/atheris_core.py --target=profile   -max_total_time=600 /tmp/core_corpus_prof
    python tests/fuzz/atheris_core.py --target=stream -runs=20000     # no corpus folder: a smoke run

--target picks the property (default: stream); every other argument goes to libFuzzer
(-max_total_time, -runs, -jobs, -dict, ...). A profile corpus folder is seeded with the shipped
profiles when empty. The properties are the ones in tests/fuzz/fuzz_core.py: any input that
raises, or breaks one of them, is a crash written to ./crash-*; replay it with
`python tests/fuzz/atheris_core.py --target=... ./crash-<hash>` and turn it into an @example in
tests/core/test_fuzz_core.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for edge_spec
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy  # noqa: E402,F401 - imported before instrumentation: not worth instrumenting

with atheris.instrument_imports(include=["edge_spec", "fuzz_core"]):
    import fuzz_core

    import edge_spec.config.profiles  # noqa: F401 - imported lazily by fuzz_core: instrument it here
    from edge_spec.core.types import Reference

REPO = Path(__file__).resolve().parents[2]
TOKS = [0, 1, 2] + [b + 3 for b in b"ab \n(){}"] + [0xC3 + 3, 0xA9 + 3]
STOP_CHARS = "ab\n\ufffd\u00e9\u20ac"
REF_CHARS = "ab \n(){}\u00e9"


def _text(fdp: atheris.FuzzedDataProvider, alphabet: str, max_len: int) -> str:
    n = fdp.ConsumeIntInRange(0, max_len)
    return "".join(alphabet[b % len(alphabet)] for b in fdp.ConsumeBytes(n))


def one_stream(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    byte_level = fdp.ConsumeBool()
    stops = [_text(fdp, STOP_CHARS, 4) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    cuts = [fdp.ConsumeIntInRange(0, 255) for _ in range(fdp.ConsumeIntInRange(0, 24))]
    fuzz_core.check_stream(fdp.ConsumeBytes(fdp.remaining_bytes()), cuts, stops, byte_level)


def one_reference(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    ngram_min, ngram_max = fdp.ConsumeIntInRange(1, 4), fdp.ConsumeIntInRange(1, 40)
    text_min_chars, requests = fdp.ConsumeIntInRange(1, 24), fdp.ConsumeIntInRange(1, 2)
    refs: list[str] = []
    for _ in range(fdp.ConsumeIntInRange(0, 3)):
        text = _text(fdp, REF_CHARS, 120)
        cuts = [fdp.ConsumeIntInRange(0, 130) for _ in range(fdp.ConsumeIntInRange(0, 4))]
        refs.append(Reference(text, cuts) if cuts else text)
    prompt = [TOKS[b % len(TOKS)] for b in fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 60))]
    steps = [
        (
            fdp.ConsumeIntInRange(-2, 40),
            fdp.ConsumeIntInRange(0, 64),
            fdp.ConsumeIntInRange(0, 64),
            TOKS[fdp.ConsumeIntInRange(0, len(TOKS) - 1)],
        )
        for _ in range(fdp.ConsumeIntInRange(0, 40))
    ]
    fuzz_core.check_reference(prompt, refs, steps, ngram_min, ngram_max, text_min_chars, requests)


def one_profile(data: bytes) -> None:
    fuzz_core.check_profile_text(data.decode("utf-8", errors="replace"))


TARGETS = {"stream": one_stream, "reference": one_reference, "profile": one_profile}


def main() -> None:
    target = "stream"
    for arg in list(sys.argv[1:]):
        if arg.startswith("--target="):
            target = arg.split("=", 1)[1]
            sys.argv.remove(arg)
    if target not in TARGETS:
        sys.exit(f"unknown --target={target}: use one of {', '.join(TARGETS)}")
    folders = [Path(a) for a in sys.argv[1:] if not a.startswith("-") and not Path(a).is_file()]
    if target == "profile" and folders:
        folders[0].mkdir(parents=True, exist_ok=True)
        if not any(folders[0].iterdir()):
            for toml in sorted((REPO / "profiles").glob("*.toml")):
                (folders[0] / toml.name).write_bytes(toml.read_bytes())
    atheris.Setup(sys.argv, TARGETS[target])
    atheris.Fuzz()


if __name__ == "__main__":
    main()

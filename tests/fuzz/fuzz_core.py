"""Fuzz properties of the core: the UTF-8 text stream, the reference drafter, the profile loader.

Shared by tests/core/test_fuzz_core.py (hypothesis, bounded for CI) and tests/fuzz/atheris_core.py
(coverage-guided, for long runs). Each `check_*` function raises AssertionError (or whatever
escaped the code under test) when a property breaks, and returns quietly otherwise.
"""

from __future__ import annotations

import codecs
import math
from collections.abc import Sequence
from typing import Any

from edge_spec.core.textstream import TextStream
from edge_spec.core.types import Reference
from edge_spec.drafters.reference import ReferenceConfig, ReferenceDrafter
from edge_spec.errors import UserError
from edge_spec.runtimes.fake import OFFSET, FakeRuntime

# --------------------------------------------------------------------------------------------
# TextStream: token bytes in, UTF-8-safe deltas out, cut at the first stop string.


def pieces_of(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    """Split `data` at the given offsets (taken modulo len+1, sorted, duplicates allowed)."""
    at = sorted(c % (len(data) + 1) for c in cuts)
    bounds = [0, *at, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def stream_oracle(pieces: Sequence[bytes], stops: Sequence[str]) -> tuple[str, bool]:
    """What the stream must produce: (text, stopped).

    Decoding is UTF-8 with errors='replace' over the whole byte string. Stop strings are
    checked after each token, on the text decoded so far (an incomplete trailing character is
    not text yet): at the first token after which the text contains a stop string, the output
    is that text cut at the earliest-starting occurrence of any stop string. At the end, the
    cut-off character's U+FFFD can complete a stop string too.
    """
    stops = [s for s in stops if s]
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = ""
    for final, piece in [*((False, p) for p in pieces), (True, b"")]:
        text += dec.decode(piece, final=final)
        hits = [i for i in (text.find(s) for s in stops) if i >= 0]
        if hits:
            return text[: min(hits)], True
    return text, False


def check_stream(
    data: bytes, cuts: Sequence[int], stops: Sequence[str], byte_level: bool = False
) -> str:
    """Push `data` through a TextStream and check every property; return the output text.

    byte_level: one token per byte through FakeRuntime (id = byte + 3), as the fake model
    emits. Otherwise `data` is split at `cuts` and each piece is one token of a BPE-like
    vocabulary (pieces may be empty, like BOS, or hold several characters).
    """
    if byte_level:
        rt = FakeRuntime()
        pieces = [bytes([b]) for b in data]
        tokens = [b + OFFSET for b in data]
        token_bytes = rt.token_bytes
    else:
        pieces = pieces_of(data, cuts)
        tokens = list(range(len(pieces)))
        token_bytes = dict(enumerate(pieces)).__getitem__
    ts = TextStream(token_bytes, stops)
    live = [s for s in stops if s]
    deltas: list[str] = []
    for tok in tokens:
        delta, stopped = ts.push(tok)
        assert isinstance(delta, str)
        deltas.append(delta)
        if stopped:
            break
        # Minimal hold-back: what is not emitted yet is empty or a proper prefix of a stop.
        held = ts.text[ts.emitted :]
        assert not held or any(len(held) < len(s) and s.startswith(held) for s in live), (
            held,
            live,
        )
    deltas.append(ts.flush())
    out = "".join(deltas)
    want, want_stop = stream_oracle(pieces, stops)
    assert out == want, (out, want)
    assert ts.stopped == want_stop and ts.text == out
    whole = data.decode("utf-8", errors="replace")
    assert whole.startswith(out)
    if want_stop:
        assert any(whole[len(out) :].startswith(s) for s in live)
    else:
        assert out == whole
    assert not any(s in out for s in live), "a stop string leaked into the output"
    return out


# --------------------------------------------------------------------------------------------
# Reference drafter: drafts are slices of what it was given, and nothing raises.


def _chars(tokens: Sequence[int]) -> str:
    """Tokens as a string of code points, so `in` does a fast contiguous-slice search."""
    return "".join(map(chr, tokens))


def check_reference(
    prompt: Sequence[int],
    references: Sequence[str],
    steps: Sequence[tuple[int, int, int, int]],
    ngram_min: int = 2,
    ngram_max: int = 32,
    text_min_chars: int = 12,
    requests: int = 1,
) -> dict[str, int]:
    """Drive a ReferenceDrafter over FakeRuntime (byte tokens) the way the loop does.

    Each step is (limit, k, accepted, next token): propose(context, limit); the controller
    keeps the first k % (len+1) tokens; the target accepts accepted % (k+1) of them and adds
    `next token`; observe() is told. Returns tokens drafted per kind (feature prefix).
    """
    rt = FakeRuntime(n_ctx=1 << 16)
    cfg = ReferenceConfig(ngram_min=ngram_min, ngram_max=ngram_max, text_min_chars=text_min_chars)
    d = ReferenceDrafter(rt, cfg)
    refs = [Reference.of(r) for r in references]
    ref_toks = [rt.tokenize(r.text, special=False) for r in refs]
    cuts = [
        [],
        *(
            sorted({min(len(r.text[:c].encode()), len(t)) for c in r.cuts})
            for r, t in zip(refs, ref_toks, strict=True)
        ),
    ]
    drafted: dict[str, int] = {}
    for _ in range(requests):
        d.begin(list(prompt), list(references))
        texts = [rt.detokenize(prompt).encode(), *(r.text.encode() for r in refs)]
        ctx = list(prompt)
        for limit, k_raw, acc_raw, nxt in steps:
            draft = d.propose(list(ctx), limit)
            toks = draft.tokens
            assert isinstance(toks, list) and all(isinstance(t, int) for t in toks)
            assert len(toks) <= max(limit, 0), (len(toks), limit)
            if toks:
                assert draft.source == "reference"
                _check_origin(draft.feature, toks, ctx, ref_toks, texts, ngram_min)
            if toks and not draft.feature.endswith("-text"):
                # White-box: the draft is refs[r][p:] up to the limit or the reference's next
                # cut point, whichever comes first (cuts are computed here independently:
                # with byte tokens a character offset's token index is its byte offset).
                r, p = d._last
                src = ctx if r == 0 else ref_toks[r - 1]
                nxt_cut = min((c for c in cuts[r] if c > p), default=len(src))
                assert toks == src[p : min(p + limit, nxt_cut)], (toks, r, p, limit, cuts[r])
            kind = draft.feature[:5] if toks else "empty"
            drafted[kind] = drafted.get(kind, 0) + len(toks)
            k = k_raw % (len(toks) + 1)
            acc = acc_raw % (k + 1)
            d.observe(draft.head(k), acc)
            ctx += [*toks[:acc], nxt]
    return drafted


def _check_origin(
    feature: str,
    toks: list[int],
    ctx: list[int],
    refs: list[list[int]],
    texts: list[bytes],
    ngram_min: int,
) -> None:
    feature = feature.replace("ref-f-", "ref-", 1)  # a free prompt's family: the same drafts
    if feature == "ref-start":  # no output yet: the first reference's beginning
        assert refs and refs[0][: len(toks)] == toks, feature
        return
    if feature == "ref-text":  # text fallback, re-tokenized: bytes of one of the texts
        assert all(t >= OFFSET for t in toks)
        raw = bytes(t - OFFSET for t in toks)
        assert any(raw in t for t in texts), (raw, texts)
        return
    # A token match: the draft follows an occurrence of the context's last token (aligned
    # copy) or of its last ngram_min tokens (n-gram lookup), in the context or a reference.
    n = 1 if feature.startswith("ref-a-") else ngram_min
    assert feature.startswith(("ref-a-", "ref-n-")), feature
    needle = _chars(ctx[-n:] + toks)
    assert any(needle in _chars(src) for src in (ctx, *refs)), (feature, toks)


# --------------------------------------------------------------------------------------------
# Profiles: any text is a Profile or a one-line UserError.


def check_profile_text(text: str) -> Any:
    """parse_profile(text) returns a Profile or raises a one-line UserError, nothing else."""
    from edge_spec.config.profiles import parse_profile

    try:
        prof = parse_profile(text, "fuzz.toml")
    except UserError as exc:
        assert "\n" not in str(exc) and "\r" not in str(exc), repr(str(exc))
        return None
    assert prof.costs.verify_ms and all(ms > 0 for ms in prof.costs.verify_ms.values())
    return prof


def profile_floats_are_finite(prof: Any) -> bool:
    """Whether every float setting of a loaded profile is a finite number."""
    vals = [
        prof.drafter.p_min,
        prof.controller.prior_accept,
        prof.controller.prior_weight,
        prof.controller.prior_events,
        prof.controller.decay,
        prof.controller.cost_smoothing,
        prof.costs.drafter_ratio,
        prof.costs.prefill_ms_per_token,
        *prof.costs.verify_ms.values(),
    ]
    return all(math.isfinite(v) for v in vals)


def toml_value(v: Any) -> str:
    """A small TOML emitter for fuzzed values (strings via JSON escapes, keys always quoted)."""
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return (
            "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
        )
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return (
            "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"
        )
    return str(v)  # dates and times: their isoformat is TOML


def toml_document(doc: dict[str, Any]) -> str:
    """Top-level scalars first, then one [table] per dict value (nested dicts inline)."""
    import json

    lines = [
        f"{json.dumps(k)} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)
    ]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines += ["", f"[{json.dumps(k)}]"]
            lines += [f"{json.dumps(str(kk))} = {toml_value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"

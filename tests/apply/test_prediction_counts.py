"""Predicted Outputs accounting: the line-then-token diff against a whole-file token diff."""

from __future__ import annotations

import difflib
import json
import re

from conftest import BENCH

from edge_spec.server.wire import prediction_counts


def _tokenizer() -> tuple[dict[str, int], frozenset[int]]:
    vocab: dict[str, int] = {}
    return vocab, frozenset({vocab.setdefault("\n", 0)})


def _tok(vocab: dict[str, int], text: str) -> list[int]:
    return [vocab.setdefault(w, len(vocab)) for w in re.findall(r"\w+|\s|.", text)]


def test_counts_match_a_whole_token_diff_on_dev_tasks() -> None:
    vocab, nl = _tokenizer()
    for line in (BENCH / "code_apply_dev_small.jsonl").read_text().splitlines()[:8]:
        t = json.loads(line)
        for a, b in ((t["original"], t["expected"]), (t["expected"], t["original"])):
            pred, out = _tok(vocab, a), _tok(vocab, b)
            acc, rej = prediction_counts(pred, out, nl)
            full = sum(
                m.size
                for m in difflib.SequenceMatcher(
                    None, pred, out, autojunk=False
                ).get_matching_blocks()
            )
            assert acc + rej == len(pred)
            # A line-aligned diff can miss matches that cross line pairs, never invent any.
            assert full * 0.98 <= acc <= full, (t["id"], acc, full)


def test_edge_cases() -> None:
    assert prediction_counts([], [1, 2]) == (0, 0)
    assert prediction_counts([1, 2, 3], []) == (0, 3)
    assert prediction_counts([1, 2, 3], [1, 2, 3]) == (3, 0)  # no newline tokens: one line
    assert prediction_counts([5, 0, 6, 0, 7], [5, 0, 8, 0, 7], frozenset({0})) == (4, 1)

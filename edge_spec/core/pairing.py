"""Can this drafter draft for this target? llama.cpp's rule (docs/design.md, "Pairing")."""

from __future__ import annotations

from edge_spec.errors import UserError
from edge_spec.runtimes.base import VocabInfo

MAX_SIZE_DIFF = 128
FIRST_CHECKED_ID = 5


def pair_problem(target: VocabInfo, drafter: VocabInfo) -> str | None:
    """Why the two vocabularies do not pair, or None when they do."""
    if target.vocab_type != drafter.vocab_type:
        return f"vocabulary types differ ({target.vocab_type} vs {drafter.vocab_type})"
    if target.bos_id != drafter.bos_id or target.eos_id != drafter.eos_id:
        return (
            f"special tokens differ (BOS {target.bos_id} vs {drafter.bos_id}, "
            f"EOS {target.eos_id} vs {drafter.eos_id})"
        )
    if abs(target.size - drafter.size) > MAX_SIZE_DIFF:
        return f"vocabulary sizes differ by more than {MAX_SIZE_DIFF} ({target.size} vs {drafter.size})"
    if target.fingerprint == drafter.fingerprint:
        return None
    a, b = target.token_text, drafter.token_text
    for i in range(FIRST_CHECKED_ID, min(len(a), len(b))):
        if a[i] != b[i]:
            return f"token {i} differs ({a[i]!r} vs {b[i]!r})"
    return None


def check_pair(
    target: VocabInfo, drafter: VocabInfo, names: tuple[str, str] = ("target", "drafter")
) -> None:
    """Raise a one-line UserError when the drafter cannot draft for the target."""
    problem = pair_problem(target, drafter)
    if problem:
        raise UserError(
            f"drafter {names[1]} does not pair with target {names[0]}: {problem}; "
            "use a drafter with the same tokenizer (e.g. the same model family)"
        )

"""The controller's acceptance model: what one rejection, or a run of them, does to the next draft."""

from __future__ import annotations

from edge_spec.config.settings import DEFAULT_VERIFY_MS, ControllerSettings
from edge_spec.core.controller import Controller
from edge_spec.core.types import Draft


def _ctl(**priors: float) -> Controller:
    return Controller(ControllerSettings(verify_ms=DEFAULT_VERIFY_MS, feature_priors={**priors}))


def _draft(feature: str, n: int = 128) -> Draft:
    return Draft(tokens=list(range(n)), source="reference", feature=feature)


def _observe(ctl: Controller, feature: str, k: int, accepted: int, n: int = 128) -> None:
    # Steps priced as the table says, so only acceptance is learned.
    ctl.observe(_draft(feature, n), k, accepted, ctl.verify_ms(k + 1))


def _regrowth(ctl: Controller, feature: str, steps: int = 12) -> list[int]:
    """The draft lengths chosen after one rejection 23 tokens in, every draft then right."""
    _observe(ctl, feature, 112, 22)
    ks = []
    for _ in range(steps):
        k = ctl.best_prefix(_draft(feature), 1000)[0]
        ks.append(k)
        _observe(ctl, feature, k, k)
    return ks


def test_one_rejection_in_a_copy_does_not_stall_the_drafts() -> None:
    # A reference draft breaks at an edit point wherever it started, so the tokens it then
    # copies right count for every position: the drafts grow back to full length in a few steps.
    ks = _regrowth(_ctl(**{"ref-a": 0.999}), "ref-a-s64")
    assert ks[0] >= 16 and ks[2] >= 96 and ks[-1] == 128, ks
    # The per-bin model (kept for model drafts, whose acceptance falls along the draft) only
    # learns about the rejected bin from drafts that reach into it: it crawls a token or two a
    # step, as reference drafts did before their bins were pooled.
    crawl = _regrowth(_ctl(copy=0.999), "copy")
    assert max(crawl) < 48 and crawl == sorted(crawl), crawl


def test_matches_that_keep_failing_at_their_first_token_stop_being_drafted() -> None:
    ctl = _ctl(**{"ref-n": 0.99})
    assert ctl.best_prefix(_draft("ref-n-gt16", 64), 1000)[0] > 16
    for _ in range(3):  # coincidences: wrong from their first token
        _observe(ctl, "ref-n-gt16", 64, 0, 64)
    assert ctl.best_prefix(_draft("ref-n-gt16", 64), 1000)[0] == 0
    # ... which says little about the tokens after a first one that holds.
    assert ctl.accept_rate("ref-n-gt16") < 0.6
    assert ctl.expected_accepted("ref-n-gt16", 64) > 0.4 * 64


def test_the_first_request_drafts_a_whole_copy() -> None:
    # The shipped priors: an apply answer's start and an aligned copy are priced for the
    # longest draft from the first step, a 2-token coincidence is not drafted at all.
    ctl = Controller(ControllerSettings())
    assert ctl.best_prefix(_draft("ref-start"), 1000)[0] == 128
    assert ctl.best_prefix(_draft("ref-a-s64"), 1000)[0] == 128
    assert ctl.best_prefix(_draft("ref-n-le2", 64), 1000)[0] == 0


def test_a_free_prompts_echo_is_priced_apart_from_an_apply_copy() -> None:
    # The shipped priors: without a reference, an aligned copy that held for a few tokens is
    # an echo of the prompt (a name, a signature), not the long copy an apply's is; on a CPU,
    # whose verify cost grows with its length, it is not drafted far, nor a short match at all.
    ctl = Controller(ControllerSettings())
    assert ctl.best_prefix(_draft("ref-a-s8"), 1000)[0] >= 96
    assert ctl.best_prefix(_draft("ref-f-a-s8"), 1000)[0] <= 8
    assert ctl.best_prefix(_draft("ref-f-n-le2", 64), 1000)[0] == 0
    # What a free prompt's drafts teach stays with them.
    for _ in range(4):
        _observe(ctl, "ref-f-a-s8", 8, 0)
    assert ctl.best_prefix(_draft("ref-a-s8"), 1000)[0] >= 96

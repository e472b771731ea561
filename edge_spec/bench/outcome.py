"""What the user gets from an apply, as `edge-spec run --out FILE` would leave it.

`edge-spec run` writes the file unless the answer check finds it wrong (`suspect`, refused by
default: nothing written, exit 3) or the engine raises (one line, exit 2, nothing written).
A written file may come with a warning (the model left code out: the answer kept as is, or
the snippet's naive merge written instead; or it drops a definition the snippet never names). The bench sorts each apply into one outcome:

- `right`: the written file is the expected one, byte for byte;
- `right_ws`: it differs only in trailing whitespace, blank lines or a byte order mark
  (indentation counts);
- `wrong_flagged`: a wrong file written with a warning;
- `wrong_silent`: a wrong file written as if right, the failure that must not happen;
- `refused`: nothing written, a reason given; `refused_right` says whether the candidate
  answer the check held back was right (None when there was none, or no expected file); false
  on a task marked `ambiguous`, where saying no is the right answer.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import numpy as np

Outcome = Literal["right", "right_ws", "wrong_flagged", "wrong_silent", "refused"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
PATHS = ("merge", "model")  # region answers are the model's path: a model wrote part of them


def layout_equal(a: str, b: str) -> bool:
    """Equal but for trailing whitespace, blank lines, line ends and a byte order mark
    (indentation counts).

    >>> layout_equal("def f():\\n    return 1  \\n\\n", "def f():\\n\\n    return 1\\n")
    True
    >>> layout_equal("def f():\\n  return 1\\n", "def f():\\n    return 1\\n")
    False
    """

    def lines(s: str) -> list[str]:
        return [ln.rstrip() for ln in s.replace("\ufeff", "").splitlines() if ln.strip()]

    return lines(a) == lines(b)


def classify(
    text: str | None, expected: str | None, *, refused: bool, warned: bool
) -> Outcome | None:
    """The outcome of one apply (None: nothing to judge it by)."""
    if refused:
        return "refused"
    if text is None or expected is None:
        return None
    if text == expected:
        return "right"
    if layout_equal(text, expected):
        return "right_ws"
    return "wrong_flagged" if warned else "wrong_silent"


def user_outcome(
    rec: dict[str, Any], expected: str | None, ambiguous: bool = False
) -> dict[str, Any]:
    """The outcome fields of one of our apply records: outcome, refused_right, warned.

    A crash of the bench itself (an `error` that is not a refusal) has no outcome. On a task
    marked `ambiguous` (the snippet does not say where its code goes), a refusal holds back
    nothing right.
    """
    refusal = rec.get("refusal")
    if rec.get("error") and refusal is None:
        return {"outcome": None, "refused_right": None, "warned": None}
    refused = refusal is not None or bool(rec.get("suspect"))
    candidate = None if refusal is not None else rec.get("text")
    warned = bool(rec.get("lazy_lines") or rec.get("fallback") or rec.get("warnings"))
    out = classify(candidate, expected, refused=refused, warned=warned)
    right = None
    if refused and ambiguous:
        right = False  # no placement is right, so the refusal held back nothing right
    elif refused and candidate is not None and expected is not None:
        right = classify(candidate, expected, refused=False, warned=False) in ("right", "right_ws")
    return {"outcome": out, "refused_right": right, "warned": None if refused else warned}


def percentile(xs: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between the closest ranks; None for no data."""
    return float(np.percentile(xs, q)) if xs else None


def _seconds(records: list[dict[str, Any]]) -> dict[str, Any]:
    xs = [r["e2e_ms"] / 1000 for r in records if r.get("e2e_ms") is not None]
    p50, p95 = percentile(xs, 50), percentile(xs, 95)
    return {
        "n": len(xs),
        "p50_s": None if p50 is None else round(p50, 3),
        "p95_s": None if p95 is None else round(p95, 3),
    }


def outcome_table(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per mode: the count of each outcome over its apply runs, refusals that were right,
    runs with no outcome (no expected file, or a bench error), and end-to-end seconds (p50,
    p95) on the merge path, the model path (whole file or by region) and overall."""
    out: dict[str, dict[str, Any]] = {}
    for mode in dict.fromkeys(r["mode"] for r in records):
        rs = [r for r in records if r["mode"] == mode]
        if not any(r.get("outcome") or r.get("engine_used") for r in rs):
            continue  # a peer, or free generation: no apply of ours to judge
        row: dict[str, Any] = {"runs": len(rs)}
        row.update({o: sum(r.get("outcome") == o for r in rs) for o in OUTCOMES})
        row["refused_right"] = sum(bool(r.get("refused_right")) for r in rs)
        row["unjudged"] = sum(r.get("outcome") is None for r in rs)
        row["e2e"] = {
            "merge": _seconds([r for r in rs if r.get("engine_used") == "merge"]),
            "model": _seconds(
                [r for r in rs if r.get("engine_used") in ("model", "region", "choice")]
            ),
            "all": _seconds(rs),
        }
        out[mode] = row
    return out

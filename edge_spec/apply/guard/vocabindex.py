"""A vocabulary's token bytes arranged for the line guard's lookups (`edge_spec.apply.guard.lineset`)."""

from __future__ import annotations

from collections.abc import Callable

_WS = b" \t"  # indentation


class VocabIndex:
    """A vocabulary's token bytes arranged for line lookups (built once per vocabulary)."""

    def __init__(self, token_bytes: Callable[[int], bytes], n_vocab: int) -> None:
        self.exact: dict[bytes, list[int]] = {}  # token bytes (no newline) -> ids
        self.lead: dict[bytes, list[int]] = {}  # the same without leading blanks -> ids
        self.lead_ws: dict[bytes, dict[bytes, list[int]]] = {}  # ... -> leading blanks -> ids
        self.control: list[int] = []  # tokens with no bytes (end of text and the like)
        # Tokens with a newline: (id, bytes before the first newline, segments after it).
        self.newline: list[tuple[int, bytes, tuple[bytes, ...]]] = []
        for tid in range(n_vocab):
            raw = token_bytes(tid)
            if not raw:
                self.control.append(tid)
            elif b"\n" in raw:
                first, *rest = raw.split(b"\n")
                self.newline.append((tid, first, tuple(rest)))
            else:
                self.exact.setdefault(raw, []).append(tid)
                body = raw.lstrip(_WS)
                self.lead.setdefault(body, []).append(tid)
                # By the blanks they open with, for a guard that keeps indentation too.
                self.lead_ws.setdefault(body, {}).setdefault(
                    raw[: len(raw) - len(body)], []
                ).append(tid)
        # Sorted, so a piece of a line that no token starts with ends the lookups along it.
        self.exact_sorted = sorted(self.exact)
        self.lead_sorted = sorted(self.lead)
        # Newline tokens by what their first segment must complete: its bytes (after a partial
        # line), or its bytes without the indentation (at a line's start: `heads`, each split
        # into those with only blanks after the newline, always allowed then, and the others,
        # checked per state against what they write after it: `rests`).
        self.ends: dict[bytes, list[int]] = {}
        self.rests: dict[int, tuple[bytes, ...]] = {}
        self.blank_lines: dict[int, int] = {}  # the others: blank lines after the first newline
        # Newline tokens that end on indentation: the blanks after their last newline.
        self.indents = {
            tid: after[-1]
            for tid, _, after in self.newline
            if after[-1] and not after[-1].strip(_WS)
        }
        # ... and the blanks before their first segment's text (none: left out).
        self.head_ws = {
            tid: head[: len(head) - len(head.lstrip(_WS))]
            for tid, head, _ in self.newline
            if head[:1] in (b" ", b"\t")
        }
        # ... and those that write a blank line with blanks on it after a newline.
        self.padded = frozenset(
            tid
            for tid, _, after in self.newline
            if any(seg and not seg.strip(_WS) for seg in after[:-1])
        )
        starts: dict[bytes, list[int]] = {}
        for tid, head, after in self.newline:
            self.ends.setdefault(head, []).append(tid)
            starts.setdefault(head.lstrip(_WS), []).append(tid)
            if any(seg.strip(_WS) for seg in after):
                self.rests[tid] = after
            else:
                self.blank_lines[tid] = len(after) - 1
        self.heads = {
            head: ([t for t in tids if t not in self.rests], [t for t in tids if t in self.rests])
            for head, tids in starts.items()
        }

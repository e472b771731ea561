"""Hybrid drafter: the reference when it has a match, else the model when it pays, else nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from edge_spec.drafters.base import Draft
from edge_spec.drafters.model import ModelDrafter
from edge_spec.drafters.reference import ReferenceDrafter

if TYPE_CHECKING:
    from edge_spec.adapt import Controller


class HybridDrafter:
    """Combine a reference drafter and a model drafter; the controller arbitrates."""

    name = "hybrid"

    def __init__(self, reference: ReferenceDrafter, model: ModelDrafter | None) -> None:
        self.reference = reference
        self.model = model

    def begin(self, prompt: Sequence[int], references: Sequence[str]) -> None:
        self.reference.begin(prompt, references)
        if self.model is not None:
            self.model.begin(prompt, references)

    def propose(self, context: Sequence[int], limit: int, ctl: Controller) -> Draft:
        draft = self.reference.propose(context, limit, ctl)
        if len(draft) and ctl.pays(draft, limit):
            return draft
        if self.model is not None:
            return self.model.propose(context, limit, ctl)
        return draft

    def observe(self, draft: Draft, accepted: int) -> None:
        self.reference.observe(draft, accepted)

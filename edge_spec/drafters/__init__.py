"""Drafters propose tokens for the target to verify: reference (prompt lookup), model, hybrid."""

from edge_spec.drafters.base import Draft, Drafter

__all__ = ["Draft", "Drafter"]

"""Drafters propose tokens for the target to verify: reference (prompt lookup) and model.

A "hybrid" is not a drafter of its own: it is a list of drafters the controller arbitrates.
"""

from edge_spec.core.types import Draft, Drafter, Reference

__all__ = ["Draft", "Drafter", "Reference"]

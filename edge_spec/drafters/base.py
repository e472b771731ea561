"""The `Drafter` protocol and the `Draft` it returns (defined in the core, which uses them)."""

from edge_spec.core.types import EMPTY, Draft, Drafter, Reference

__all__ = ["EMPTY", "Draft", "Drafter", "Reference"]

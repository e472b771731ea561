"""Drafters propose tokens for the target to verify: reference (prompt lookup) and model.

The `Drafter` protocol and the `Draft` it returns live in `edge_spec.core.types` (the loop uses
them). A "hybrid" is not a drafter of its own: it is a list of drafters the controller arbitrates.
"""

"""User-facing errors: the CLI prints their message as one line and exits 2, no traceback."""

from __future__ import annotations

import importlib


class UserError(Exception):
    """Something the user can fix: a bad path, a corrupt file, an oversized input.

    The message is one line that says what is wrong and what to do.
    """

    exit_code = 2


class MissingExtraError(UserError):
    """A feature needs an optional dependency that is not installed."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"this needs the '{module}' package: pip install 'edge-spec[{extra}]'")


def require(module: str, extra: str):  # noqa: ANN201 - returns a module
    """Import an optional heavy dependency lazily, naming the extra when it is missing.

    >>> np = require("numpy", "core")
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError(module.split(".")[0], extra) from exc

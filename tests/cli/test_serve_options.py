"""`edge-spec serve` passes its connection options to the server, with the settings' defaults."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from edge_spec.cli.main import main
from edge_spec.config.settings import ServerSettings

pytest.importorskip("uvicorn")

_FIELDS = ("header_timeout_s", "body_timeout_s", "keep_alive_s", "max_connections")


class _Server:
    started = True

    def run(self) -> None:
        pass


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[ServerSettings]:
    """The settings each `serve` call would start uvicorn with (nothing binds a socket)."""
    import edge_spec.server.app as app

    seen: list[ServerSettings] = []

    def make_server(_app: Any, settings: ServerSettings, _level: str) -> _Server:
        seen.append(settings)
        return _Server()

    monkeypatch.setattr(app, "make_server", make_server)
    return seen


def test_connection_defaults_come_from_the_settings(served: list[ServerSettings]) -> None:
    res = CliRunner().invoke(main, ["serve", "--log-level", "error"])
    assert res.exit_code == 0, (res.output, res.exception)
    assert [getattr(served[0], f) for f in _FIELDS] == [getattr(ServerSettings, f) for f in _FIELDS]


def test_connection_options_reach_the_server(served: list[ServerSettings]) -> None:
    args = ["--header-timeout", "2.5", "--body-timeout", "7", "--keep-alive", "1.5"]
    res = CliRunner().invoke(
        main, ["serve", *args, "--max-connections", "3", "--log-level", "error"]
    )
    assert res.exit_code == 0, (res.output, res.exception)
    assert [getattr(served[0], f) for f in _FIELDS] == [2.5, 7.0, 1.5, 3]


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--header-timeout", "0"), ("--body-timeout", "-1"), ("--max-connections", "0")],
)
def test_out_of_range_connection_option_is_a_usage_error(
    served: list[ServerSettings], flag: str, value: str
) -> None:
    res = CliRunner().invoke(main, ["serve", flag, value])
    assert res.exit_code == 2 and flag in res.output and not served, res.output

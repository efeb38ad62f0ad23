"""Where the action API lives: paths, websocket URLs, API-key headers."""

from __future__ import annotations

from typing import Any

import pytest

from vla_client.protocol import auth_headers, check_endpoint, websocket_url


@pytest.mark.parametrize(
    ("url", "endpoint", "want"),
    [
        ("ws://h:1", None, ("ws://h:1/v1/actions/realtime", "realtime")),
        ("http://h:1/", "openpi", ("ws://h:1/openpi/policy", "openpi")),
        ("https://h/proxy", None, ("wss://h/proxy/v1/actions/realtime", "realtime")),
        ("wss://h/openpi/policy", None, ("wss://h/openpi/policy", "openpi")),
    ],
)
def test_websocket_url_picks_the_endpoint_path(url: str, endpoint: Any, want: Any) -> None:
    assert websocket_url(url, endpoint) == want


def test_websocket_url_refuses_contradictions() -> None:
    with pytest.raises(ValueError, match="openpi endpoint"):
        websocket_url("ws://h/openpi/policy", "realtime")
    with pytest.raises(ValueError, match="ws"):
        websocket_url("ftp://h", None)


def test_auth_header_follows_the_endpoint() -> None:
    assert auth_headers("k", "openpi") == {"Authorization": "Api-Key k"}
    assert auth_headers("k", "realtime") == {"Authorization": "Bearer k"}
    assert auth_headers("k") == {"Authorization": "Bearer k"}
    assert auth_headers(None, "realtime") == {}


def test_an_unknown_endpoint_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="'realtime', 'openpi'"):
        check_endpoint("pi0")
    with pytest.raises(ValueError, match="'realtime', 'openpi'"):
        websocket_url("ws://h:1", "pi0")  # type: ignore[arg-type]

"""How a client reaches its server (`vla_client.client.addressing`): the transport chosen from
the URL's scheme, the ``transport`` and the ``endpoint`` given, each combination that cannot
work refused with a `ValueError` that says what would, and a URL copied from a request (ending
in one of the server's routes) refused naming the base URL to give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from client_kit import closed, exactly

from vla_client import ActionClient, AsyncActionClient

CLIENTS = [ActionClient, AsyncActionClient]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    ("url", "keywords", "kind", "endpoint"),
    [
        ("http://127.0.0.1:1", {}, "HTTPTransport", None),
        ("https://127.0.0.1:1/robot", {}, "HTTPTransport", None),
        ("http://127.0.0.1:1", {"transport": "http"}, "HTTPTransport", None),
        ("ws://127.0.0.1:1", {}, "WebSocketTransport", "realtime"),
        ("wss://127.0.0.1:1", {}, "WebSocketTransport", "realtime"),
        ("http://127.0.0.1:1", {"transport": "websocket"}, "WebSocketTransport", "realtime"),
        ("http://127.0.0.1:1", {"endpoint": "openpi"}, "WebSocketTransport", "openpi"),
        ("ws://127.0.0.1:1", {"transport": "websocket", "endpoint": "openpi"},
         "WebSocketTransport", "openpi"),
        ("tcp://127.0.0.1:1", {}, "ZmqTransport", None),
        ("tcp://127.0.0.1:1", {"endpoint": "gr00t"}, "ZmqTransport", None),
        ("tcp://127.0.0.1:1", {"transport": "zmq"}, "ZmqTransport", None),
        ("tcp://127.0.0.1:1", {"transport": "zmq", "endpoint": "gr00t"}, "ZmqTransport", None),
        ("ipc://{tmp}/server.sock", {}, "IpcTransport", None),
        ("ipc://{tmp}/server.sock", {"transport": "ipc"}, "IpcTransport", None),
    ],
)  # fmt: skip
def test_the_transport_follows_the_url_then_the_transport_and_endpoint_given(
    client: type, url: str, keywords: dict[str, Any], kind: str, endpoint: str | None,
    tmp_path: Path,
) -> None:  # fmt: skip
    made = client(url.format(tmp=tmp_path), **keywords)
    try:
        prefix = "Async" if client is AsyncActionClient else ""
        assert type(made.transport).__name__ == prefix + kind
        assert getattr(made.transport, "endpoint", None) == endpoint
    finally:
        closed(made)


GR00T = "GR00T's server is at tcp://host:port with endpoint='gr00t' over ZeroMQ; got a "
IPC = "ipc is the action API over a Unix socket, an ipc://PATH URL with no endpoint; got a "


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    ("url", "keywords", "said"),
    [
        ("ws://127.0.0.1:1", {"endpoint": "gr00t"},
         GR00T + "ws:// URL, endpoint='gr00t', transport=None"),
        ("tcp://127.0.0.1:1", {"endpoint": "openpi"},
         GR00T + "tcp:// URL, endpoint='openpi', transport=None"),
        ("tcp://127.0.0.1:1", {"transport": "websocket"},
         GR00T + "tcp:// URL, endpoint=None, transport='websocket'"),
        ("http://127.0.0.1:1", {"transport": "zmq"}, "ZeroMQ is GR00T's transport: a tcp:// URL"),
        ("http://127.0.0.1:1", {"transport": "http", "endpoint": "openpi"},
         "endpoint names a websocket endpoint; it does not apply to HTTP"),
        ("ipc://{tmp}/server.sock", {"endpoint": "openpi"},
         IPC + "ipc:// URL, endpoint='openpi', transport=None"),
        ("ipc://{tmp}/server.sock", {"transport": "http"},
         IPC + "ipc:// URL, endpoint=None, transport='http'"),
        ("http://127.0.0.1:1", {"transport": "ipc"},
         IPC + "http:// URL, endpoint=None, transport='ipc'"),
        ("http://127.0.0.1:1/v1/actions/metadata/", {},
         "http://127.0.0.1:1/v1/actions/metadata/ ends in the server's route "
         "/v1/actions/metadata; give the server's base URL, http://127.0.0.1:1"),
        ("https://127.0.0.1:1/robot/v1/actions/generations?x=1#top", {},
         "https://127.0.0.1:1/robot/v1/actions/generations?x=1#top ends in the server's route "
         "/v1/actions/generations; give the server's base URL, https://127.0.0.1:1/robot"),
        ("ws://127.0.0.1:1/health//", {},
         "ws://127.0.0.1:1/health// ends in the server's route /health; give the server's base "
         "URL, ws://127.0.0.1:1"),
    ],
    ids=["gr00t-on-ws", "openpi-on-tcp", "websocket-on-tcp", "zmq-on-http", "endpoint-on-http",
         "endpoint-on-ipc", "http-on-ipc", "ipc-on-http", "metadata-route", "generations-route",
         "health-route"],
)  # fmt: skip
def test_a_way_that_cannot_reach_the_server_is_refused_saying_which_would(
    client: type, url: str, keywords: dict[str, Any], said: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=exactly(said)):
        client(url.format(tmp=tmp_path), **keywords)


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:1/healthX", "http://127.0.0.1:1/v1/actions/generations2",
     "http://127.0.0.1:1/robot/health-check/"],
)  # fmt: skip
def test_a_path_that_only_begins_like_a_route_is_a_base_url(url: str) -> None:
    """Only a path that ends in a whole route is a copied request URL; a longer last segment
    is the server's own base path, and is taken as given."""
    with ActionClient(url) as client:
        assert client.base_url == url
        assert type(client.transport).__name__ == "HTTPTransport"

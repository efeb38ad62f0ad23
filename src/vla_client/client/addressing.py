"""How a client reaches its server: the base URL (never a route of it), the API key (given, or
from the environment), and which transport and endpoint carry the requests.
"""

from __future__ import annotations

import os
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from vla_client.protocol import (
    GENERATIONS_PATH,
    HEALTH_PATH,
    METADATA_PATH,
    Endpoint,
    check_endpoint,
)
from vla_client.protocol.endpoints import API_KEY_ENV
from vla_client.validation import check_choice

TransportKind = Literal["http", "websocket", "zmq", "ipc"]
TRANSPORT_KINDS: tuple[TransportKind, ...] = ("http", "websocket", "zmq", "ipc")


ROUTE_PATHS = (GENERATIONS_PATH, METADATA_PATH, HEALTH_PATH)
"""The server's own routes: a base URL ending in one is a copied request URL, not a base."""


def route_in_url(base_url: str) -> str | None:
    """Why `base_url` cannot be a server's base URL, when its path ends in one of the
    server's routes (the client appends those itself, so ``.../v1/actions/generations`` would
    be posted to twice over); None when it can. The message names the base URL to give."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    route = next((route for route in ROUTE_PATHS if path.endswith(route)), None)
    if route is None:
        return None
    base = urlunsplit((parts.scheme, parts.netloc, path.removesuffix(route), "", ""))
    return f"{base_url} ends in the server's route {route}; give the server's base URL, {base}"


def resolve_api_key(api_key: str | None) -> str | None:
    """`api_key` when given, else the `API_KEY_ENV` variable's value (stripped), else None.

    A variable set to nothing or spaces is a `ValueError`, as ``vla-client serve`` refuses it:
    it is what an unset shell variable gives, and reading it as "no key" would send requests
    without the key that was meant.
    """
    if api_key is not None:
        return api_key
    value = os.environ.get(API_KEY_ENV)
    if value is None:
        return None
    if not value.strip():
        raise ValueError(f"{API_KEY_ENV} is set but empty; unset it to send without a key")
    return value.strip()


def chosen_endpoint(endpoint: Endpoint | None, layout: object) -> Endpoint | None:
    """The websocket endpoint a client speaks: `endpoint` when given (checked), openpi's when
    only a `layout` is given (layouts are openpi's, whatever path the URL has), else None (the
    URL's path decides). The one rule for `ActionClient` and the ``--layout`` of the CLI."""
    if endpoint is not None:
        return check_endpoint(endpoint)
    return "openpi" if layout is not None else None


def transport_kind(scheme: str, transport: str | None, endpoint: str | None) -> TransportKind:
    """`transport` if given, else ZeroMQ for ``tcp://`` URLs (GR00T's server), the Unix socket
    for ``ipc://`` URLs, websocket for ``ws(s)://`` URLs or a websocket `endpoint`, else HTTP.
    GR00T's `endpoint` is ZeroMQ's only, on a ``tcp://`` URL; ``ipc`` is an ``ipc://`` URL's
    only, with no endpoint (it speaks the action API)."""
    zmq = scheme == "tcp" or endpoint == "gr00t"
    if zmq and (
        scheme != "tcp" or endpoint not in (None, "gr00t") or transport not in (None, "zmq")
    ):
        raise ValueError(
            f"GR00T's server is at tcp://host:port with endpoint='gr00t' over ZeroMQ; got a "
            f"{scheme}:// URL, endpoint={endpoint!r}, transport={transport!r}"
        )
    if scheme == "ipc" or transport == "ipc":
        return _ipc(scheme, transport, endpoint)
    if transport is not None:
        return _given_transport(transport, endpoint, zmq=zmq)
    if zmq:
        return "zmq"
    return "websocket" if scheme in ("ws", "wss") or endpoint is not None else "http"


def _ipc(scheme: str, transport: str | None, endpoint: str | None) -> TransportKind:
    """The Unix socket of an ``ipc://`` URL, which speaks the action API: refused with another
    scheme, a websocket `endpoint` or another `transport`."""
    if scheme != "ipc" or endpoint is not None or transport not in (None, "ipc"):
        raise ValueError(
            f"ipc is the action API over a Unix socket, an ipc://PATH URL with no endpoint; "
            f"got a {scheme}:// URL, endpoint={endpoint!r}, transport={transport!r}"
        )
    return "ipc"


def _given_transport(transport: str, endpoint: str | None, *, zmq: bool) -> TransportKind:
    """The `transport` asked for by name, checked against the `endpoint` and the URL (`zmq`:
    whether it is GR00T's ``tcp://``)."""
    check_choice("transport", transport, TRANSPORT_KINDS)
    if transport == "http" and endpoint is not None:
        raise ValueError("endpoint names a websocket endpoint; it does not apply to HTTP")
    if transport == "zmq" and not zmq:
        raise ValueError("ZeroMQ is GR00T's transport: a tcp:// URL")
    return transport  # type: ignore[return-value]

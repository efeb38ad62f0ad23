"""Transports carry encoded requests to a server: HTTP, and websockets beside it.

The websocket transports need the ``websocket`` extra, so they load on first use
(``vla_client.transports.WebSocketTransport``) rather than with this package.
"""

from typing import Any

from vla_client.transports.base import AsyncTransport, Reply, Transport
from vla_client.transports.http import AsyncHTTPTransport, HTTPTransport
from vla_client.transports.retry import NO_RETRY, Backoff, RetryPolicy

_WEBSOCKET_NAMES = ("AsyncWebSocketTransport", "WebSocketStats", "WebSocketTransport")

__all__ = [
    "NO_RETRY",
    "AsyncHTTPTransport",
    "AsyncTransport",
    "AsyncWebSocketTransport",
    "Backoff",
    "HTTPTransport",
    "Reply",
    "RetryPolicy",
    "Transport",
    "WebSocketStats",
    "WebSocketTransport",
]


def __getattr__(name: str) -> Any:
    if name in _WEBSOCKET_NAMES:
        from vla_client.transports import websocket

        return getattr(websocket, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

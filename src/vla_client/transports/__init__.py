"""Transports carry encoded requests to a server: HTTP today, websockets beside it."""

from vla_client.transports.base import AsyncTransport, Reply, Transport
from vla_client.transports.http import AsyncHTTPTransport, HTTPTransport

__all__ = ["AsyncHTTPTransport", "AsyncTransport", "HTTPTransport", "Reply", "Transport"]

"""Transports carry encoded requests to a server: HTTP, and websockets beside it, a Unix socket
with shared memory for a server on the same host (``ipc://``), and ZeroMQ for GR00T's policy
server.

The websocket transports need the ``websocket`` extra, the ZeroMQ ones the ``gr00t`` extra;
like every name here they load on first use (``vla_client.transports.WebSocketTransport``),
not with the package.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.transports.base import AsyncReplyStream as AsyncReplyStream
    from vla_client.transports.base import AsyncTransport as AsyncTransport
    from vla_client.transports.base import MessageTransport as MessageTransport
    from vla_client.transports.base import ReplyStream as ReplyStream
    from vla_client.transports.base import Transport as Transport
    from vla_client.transports.http import AsyncHTTPTransport as AsyncHTTPTransport
    from vla_client.transports.http import HTTPTransport as HTTPTransport
    from vla_client.transports.ipc import AsyncIpcTransport as AsyncIpcTransport
    from vla_client.transports.ipc import IpcTransport as IpcTransport
    from vla_client.transports.retry import NO_RETRY as NO_RETRY
    from vla_client.transports.retry import Backoff as Backoff
    from vla_client.transports.retry import RetryPolicy as RetryPolicy
    from vla_client.transports.websocket import AsyncWebSocketTransport as AsyncWebSocketTransport
    from vla_client.transports.websocket import WebSocketStats as WebSocketStats
    from vla_client.transports.websocket import WebSocketTransport as WebSocketTransport
    from vla_client.transports.zmq import AsyncZmqTransport as AsyncZmqTransport
    from vla_client.transports.zmq import ZmqTransport as ZmqTransport

# What `lazy_face` hands out: each name of the block above, from the same module.
_FACE = {
    "AsyncReplyStream": "vla_client.transports.base",
    "AsyncTransport": "vla_client.transports.base",
    "MessageTransport": "vla_client.transports.base",
    "ReplyStream": "vla_client.transports.base",
    "Transport": "vla_client.transports.base",
    "AsyncHTTPTransport": "vla_client.transports.http",
    "HTTPTransport": "vla_client.transports.http",
    "AsyncIpcTransport": "vla_client.transports.ipc",
    "IpcTransport": "vla_client.transports.ipc",
    "NO_RETRY": "vla_client.transports.retry",
    "Backoff": "vla_client.transports.retry",
    "RetryPolicy": "vla_client.transports.retry",
    "AsyncWebSocketTransport": "vla_client.transports.websocket",
    "WebSocketStats": "vla_client.transports.websocket",
    "WebSocketTransport": "vla_client.transports.websocket",
    "AsyncZmqTransport": "vla_client.transports.zmq",
    "ZmqTransport": "vla_client.transports.zmq",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)

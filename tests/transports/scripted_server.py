"""`ScriptedServer` is a real websocket server (the `websockets` library, in a thread) whose
replies a test chooses: wrong request ids, late replies, no ids at all. It lets the tests
check what the client does with replies the reference server would never send.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from websockets.sync.server import Server, ServerConnection, serve

from vla_client.codecs import msgpack_numpy

METADATA = {"object": "action.metadata", "model": "scripted"}
"""The metadata frame the server sends first on each connection."""

# Given the request number (from 0) and the request, the frames to send back (after a delay).
Script = Callable[[int, dict[str, Any]], tuple[float, list[Any]]]


def step_actions(index: int) -> np.ndarray:
    """A chunk that says which request it answers: every value is the request number."""
    return np.full((4, 2), float(index), dtype=np.float32)


class ScriptedServer:
    """A websocket server on loopback that answers as `script` says."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        self.quiet = threading.Event()
        """Set while the server has sent all it meant to."""
        self.quiet.set()
        self._server: Server = serve(self._handle, "127.0.0.1", 0, compression=None)
        self.port = self._server.socket.getsockname()[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/actions/realtime"

    def _handle(self, conn: ServerConnection) -> None:
        try:
            self._serve(conn)
        finally:  # a client that dropped the connection mid-answer ends it
            self.quiet.set()

    def _serve(self, conn: ServerConnection) -> None:
        self.connections += 1
        conn.send(msgpack_numpy.packb(METADATA))
        for message in conn:
            self.quiet.clear()
            request = msgpack_numpy.unpackb(message)
            index = len(self.requests)
            self.requests.append(request)
            delay, frames = self.script(index, request)
            time.sleep(delay)
            for frame in frames:
                conn.send(frame if isinstance(frame, str) else msgpack_numpy.packb(frame))
            self.quiet.set()

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(5)

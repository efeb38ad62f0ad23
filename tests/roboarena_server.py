"""RoboArena's policy server for the tests, written from its published code.

RoboArena's ``roboarena/policy_server.py`` is not on PyPI; this one does what that code does,
sharing nothing with vla-client's RoboArena code (it packs and unpacks with openpi-client's
``msgpack_numpy``, of which RoboArena's is a copy):

- a websocket on any path; on connect the ``PolicyServerConfig`` as one msgpack frame;
- each frame is a map whose ``endpoint`` is required (``KeyError`` otherwise): ``reset`` is
  answered with the text frame ``reset successful``, anything else is an observation answered
  with the policy's action chunk;
- a failure is answered with the traceback as a text frame, and the connection is closed with
  code 1011 (internal error).

Every request's bytes are kept (`frames`), and the number of connections opened. `hostile` makes
it send more frames than it is asked for (tests/hostile_frames.py; a storm of tracebacks on a
connection it keeps open); `quiet` is set while it has sent all it meant to.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
from openpi_client import msgpack_numpy
from websockets.frames import CloseCode
from websockets.sync.server import ServerConnection, serve

import hostile_frames

Policy = Callable[[dict[str, Any]], Any]


def chunk_policy(obs: dict[str, Any]) -> np.ndarray:
    """An ``(N, 8)`` chunk the tests can predict: step ``t``, column ``d`` is ``10 t + d`` plus
    the sum of the joint positions."""
    offset = float(np.sum(obs["observation/joint_position"]))
    return (10 * np.arange(3)[:, None] + np.arange(8)[None, :] + offset).astype(np.float32)


class ArenaServer:
    """The server on 127.0.0.1 (a free port) in a thread; use as a context manager."""

    def __init__(
        self, config: dict[str, Any], policy: Policy = chunk_policy, *, hostile: str | None = None
    ) -> None:
        self.config = config
        self.policy = policy
        self.hostile = hostile
        self.quiet = threading.Event()
        self.quiet.set()
        self.frames: list[bytes] = []
        self.connections = 0
        self._server = serve(self._handle, "127.0.0.1", 0, compression=None, max_size=None)
        self.url = f"ws://127.0.0.1:{self._server.socket.getsockname()[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> ArenaServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)

    def _handle(self, ws: ServerConnection) -> None:
        try:
            self._serve(ws)
        finally:  # a client that dropped the connection mid-storm ends it
            self.quiet.set()

    def _serve(self, ws: ServerConnection) -> None:
        self.connections += 1
        ws.send(msgpack_numpy.packb(self.config))
        for frame in ws:
            assert isinstance(frame, bytes)
            self.quiet.clear()
            self.frames.append(frame)
            try:
                obs = msgpack_numpy.unpackb(frame)
                endpoint = obs.pop("endpoint")
                if endpoint == "reset":
                    ws.send("reset successful")
                else:
                    answer = msgpack_numpy.packb(self.policy(obs))
                    config = msgpack_numpy.packb(self.config)
                    index = len(self.frames) - 1
                    error = "Traceback (most recent call last): a retry failed"
                    for out in hostile_frames.frames(self.hostile, index, answer, error, config):
                        ws.send(out)
                self.quiet.set()
            except Exception:
                ws.send(traceback.format_exc())
                ws.close(CloseCode.INTERNAL_ERROR, "Internal server error. Traceback included.")
                return

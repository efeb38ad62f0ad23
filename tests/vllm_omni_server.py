"""vLLM-Omni's robot endpoint for the tests, written from its published protocol.

vLLM-Omni's own server (``vllm_omni/entrypoints/openpi/connection.py``) cannot run here: it
imports vLLM, its engine and a GPU stack at the top. This one follows what that code documents
and does, and shares nothing with vla-client's vLLM-Omni code (it packs and unpacks with
openpi-client's own ``msgpack_numpy``, the format vLLM-Omni's frames follow):

- a websocket at ``/v1/realtime/robot/openpi`` (any other path is refused, 404); on connect the
  server sends its ``PolicyServerConfig`` as one msgpack frame;
- each binary frame is one map: ``{"endpoint": "reset"}`` ends the connection's session and
  answers ``{"status": "reset successful"}``; anything else is an observation, whose session is
  its ``session_id``, else the connection's, else ``"default"`` (a new one starts a new episode),
  answered with the policy's actions;
- a failure answers ``{"type": "error", "message": ...}`` (with ``code`` where the policy
  raises `Refusal`, as newer servers send one) and the connection stays open;
- as its main branch does (late 2026): with `idle_timeout_s`, a connection idle that long is
  closed (code 1000); with `policy=None`, no policy is loaded and each connection is refused
  with the text frame ``{"type": "error", "error": ..., "code": "unsupported"}`` in place of
  the config. `close_on_first_request` closes the first connection (code 1000) as the first
  request arrives, unanswered: an idle close that crossed the request on the wire.

For the clients' deadlines it can be slow: `config_delay_s` holds each connection's config
that long, `reset_delay_s` each reset's answer. A policy's answer given as `bytes` is sent as
the frame it is (one that is not msgpack).

Every request's bytes are kept (`frames`), and each observation with the session it ran in and
whether it started one (`served`), for the tests to check. `hostile` makes it send more frames
than it is asked for (tests/hostile_frames.py); `quiet` is set while it has sent all it meant to.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from openpi_client import msgpack_numpy
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import ServerConnection, serve

import hostile_frames

PATH = "/v1/realtime/robot/openpi"
NO_POLICY = "no robot policy is loaded on this server"
Policy = Callable[[dict[str, Any]], Any]


class Refusal(Exception):
    """Raised by a test policy: the error frame carries `code`."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def keyed_actions(keys: dict[str, int], horizon: int) -> Policy:
    """A policy answering per-key float32 ``(1, H, D)`` actions in reverse key order (so a
    client that trusts map order is caught): key ``k`` (its index), step ``t``, column ``d`` is
    ``100 k + 10 t + d`` plus the sum of the state."""

    def policy(obs: dict[str, Any]) -> Any:
        offset = float(np.sum(obs.get("state", 0.0)))
        actions = {}
        for k, (key, dim) in reversed(list(enumerate(keys.items()))):
            grid = 100 * k + 10 * np.arange(horizon)[:, None] + np.arange(dim)[None, :]
            actions[key] = (grid + offset).astype(np.float32)[None]
        return actions

    return policy


class OmniServer:
    """The endpoint on 127.0.0.1 (a free port) in a thread; use as a context manager."""

    def __init__(
        self,
        config: dict[str, Any],
        policy: Policy | None,
        *,
        hostile: str | None = None,
        idle_timeout_s: float | None = None,
        close_on_first_request: bool = False,
        config_delay_s: float = 0.0,
        reset_delay_s: float = 0.0,
    ) -> None:
        self.config = config
        self.policy = policy
        self.hostile = hostile
        self.idle_timeout_s = idle_timeout_s
        self.close_on_first_request = close_on_first_request
        self.config_delay_s = config_delay_s
        self.reset_delay_s = reset_delay_s
        self._closing = threading.Event()
        """Set as the server stops: a delay still running ends."""
        self.quiet = threading.Event()
        self.quiet.set()
        self.frames: list[bytes] = []
        self.served: list[tuple[str, bool]] = []
        self.connections = 0
        self._server = serve(self._handle, "127.0.0.1", 0, process_request=self._route,
                             compression=None, max_size=64 * 1024 * 1024)  # fmt: skip
        self.url = f"ws://127.0.0.1:{self._server.socket.getsockname()[1]}{PATH}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OmniServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._server.shutdown()
        self._thread.join(timeout=5)

    @staticmethod
    def _route(connection: ServerConnection, request: Request) -> Response | None:
        if request.path != PATH:
            return connection.respond(404, "Not Found\n")
        return None

    def _handle(self, ws: ServerConnection) -> None:
        try:
            self._serve(ws)
        finally:  # a client that dropped the connection mid-storm ends it
            self.quiet.set()

    def _serve(self, ws: ServerConnection) -> None:
        self.connections += 1
        if self.policy is None:
            refusal = {"type": "error", "error": NO_POLICY, "code": "unsupported"}
            ws.send(json.dumps(refusal))
            ws.close()
            return
        self._closing.wait(self.config_delay_s)
        try:
            ws.send(msgpack_numpy.packb(self.config))
        except ConnectionClosed:  # the client stopped waiting for it
            return
        session: str | None = None
        while True:
            try:
                frame = ws.recv(timeout=self.idle_timeout_s)
            except TimeoutError:
                ws.close()  # idle too long: a normal close, code 1000
                return
            except ConnectionClosed:
                return
            assert isinstance(frame, bytes)
            self.quiet.clear()
            self.frames.append(frame)
            if self.close_on_first_request and len(self.frames) == 1:
                ws.close()
                return
            try:
                obs = msgpack_numpy.unpackb(frame)
                if obs.pop("endpoint", "infer") == "reset":
                    session = None
                    self._closing.wait(self.reset_delay_s)
                    answer: Any = {"status": "reset successful"}
                else:
                    current = str(obs.get("session_id") or session or "default")
                    self.served.append((current, current != session))
                    session = current
                    answer = self.policy(obs)
            except Refusal as exc:
                answer = {"type": "error", "message": str(exc), "code": exc.code}
            except Exception:
                answer = {"type": "error", "message": "Internal inference error"}
            error = {"type": "error", "message": "Internal inference error"}
            index = len(self.frames) - 1
            for out in hostile_frames.frames(self.hostile, index, answer, error, self.config):
                ws.send(out if isinstance(out, bytes) else msgpack_numpy.packb(out))
            self.quiet.set()

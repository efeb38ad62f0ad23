"""GR00T's ``PolicyClient`` as it behaves on the wire, for the tests.

GR00T's own client (``gr00t/policy/server_client.py``) is not installable here: its package is
not on PyPI and imports torch and its model code. tests/gr00t_server.py mirrors that file's
server; this mirrors its client, written from the same published code and sharing nothing with
vla-client's GR00T code: a ZeroMQ REQ socket to ``tcp://host:port``; each call one msgpack map
``{"endpoint", "data"?, "api_token"?}`` packed as GR00T's ``MsgSerializer`` packs it
(tests/gr00t_server.py's `to_bytes` and `from_bytes`), ``data`` only for the calls that take
input; the reply ``b"ERROR"`` or a map with ``error`` raised as `RuntimeError`. Its defaults are
GR00T's: ``localhost:5555``, no token. One difference, for a test suite: a receive timeout, so
that a server that never answers fails the test rather than hanging it.
"""

from __future__ import annotations

from typing import Any

import zmq

from gr00t_server import from_bytes, to_bytes


class PolicyClient:
    def __init__(
        self,
        host: str = "localhost",
        port: int = 5555,
        timeout_ms: int = 15000,
        api_token: str | None = None,
    ) -> None:
        self.context = zmq.Context()
        self.api_token = api_token
        self.socket = self.context.socket(zmq.REQ)
        self.socket.setsockopt(zmq.RCVTIMEO, timeout_ms)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(f"tcp://{host}:{port}")

    def close(self) -> None:
        self.socket.close()
        self.context.term()

    def call_endpoint(
        self, endpoint: str, data: dict[str, Any] | None = None, requires_input: bool = True
    ) -> Any:
        request: dict[str, Any] = {"endpoint": endpoint}
        if requires_input:
            request["data"] = data
        if self.api_token:
            request["api_token"] = self.api_token
        self.socket.send(to_bytes(request))
        message = self.socket.recv()
        if message == b"ERROR":
            raise RuntimeError("Server error. Make sure we are running the correct policy server.")
        response = from_bytes(message)
        if isinstance(response, dict) and "error" in response:
            raise RuntimeError(f"Server error: {response['error']}")
        return response

    def ping(self) -> bool:
        self.call_endpoint("ping", requires_input=False)
        return True

    def get_modality_config(self) -> Any:
        return self.call_endpoint("get_modality_config", requires_input=False)

    def get_action(
        self, observation: dict[str, Any], options: dict[str, Any] | None = None
    ) -> tuple[Any, Any]:
        response = self.call_endpoint(
            "get_action", {"observation": observation, "options": options}
        )
        return tuple(response)  # type: ignore[return-value]

    def reset(self, options: dict[str, Any] | None = None) -> Any:
        return self.call_endpoint("reset", {"options": options})

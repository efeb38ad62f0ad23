"""The server's websockets, read frame by frame with a plain `websockets` client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from oracles import oracle_actions
from vla_client.cameras.scene import synthetic_frames
from vla_client.codecs import msgpack_numpy
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.policy import PolicyInput

FRAMES = synthetic_frames(2, 40, 56, seed=5)
STATE = np.linspace(-1, 1, 4).astype(np.float32)


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    app = create_app(ReferencePolicy(action_horizon=6, action_dim=4), ServerConfig(in_process=True))
    with LocalServer(app) as running:
        yield running


def open_ws(server: LocalServer, path: str) -> ClientConnection:
    return connect(f"ws://127.0.0.1:{server.port}{path}", compression=None)


def expected() -> np.ndarray:
    policy_input = PolicyInput(images=dict(FRAMES), state=STATE, task="pick")
    return oracle_actions(policy_input, horizon=6, action_dim=4)


def realtime_request(request_id: str) -> bytes:
    body = {
        "request_id": request_id,
        "input": {"task": "pick", "observation": {"images": FRAMES, "state": STATE}},
    }
    return msgpack_numpy.packb(body)


def flat_request(**extra: Any) -> bytes:
    flat = {f"observation.images.{name}": frame for name, frame in FRAMES.items()}
    return msgpack_numpy.packb({**flat, "observation.state": STATE, "prompt": "pick", **extra})


def closed_code(ws: ClientConnection) -> int | None:
    with pytest.raises(ConnectionClosed) as info:
        ws.recv(timeout=5)
    return info.value.rcvd.code if info.value.rcvd else None


def test_metadata_frame_comes_first_and_matches_http(server: LocalServer) -> None:
    http_metadata = httpx.get(f"{server.url}/v1/actions/metadata").json()
    for path in ("/v1/actions/realtime", "/openpi/policy", "/"):
        with open_ws(server, path) as ws:
            frame = ws.recv(timeout=5)
            assert isinstance(frame, bytes)
            assert msgpack_numpy.unpackb(frame) == http_metadata
    assert http_metadata["capabilities"]["realtime_websocket"] is True
    assert http_metadata["capabilities"]["openpi_websocket"] is True


def test_realtime_replies_with_envelopes_and_server_timing(server: LocalServer) -> None:
    with open_ws(server, "/v1/actions/realtime") as ws:
        ws.recv(timeout=5)
        replies = []
        for i in range(2):
            ws.send(realtime_request(f"rt-{i}"))
            replies.append(msgpack_numpy.unpackb(ws.recv(timeout=10)))
    first, second = replies
    assert first["id"] == "rt-0" and second["id"] == "rt-1"
    values = first["data"][0]["action"]["values"]
    assert isinstance(values, np.ndarray) and values.dtype == np.float32
    np.testing.assert_allclose(values, expected(), rtol=1e-6)
    assert first["server_timing"]["infer_ms"] > 0 and "prev_total_ms" not in first["server_timing"]
    assert second["server_timing"]["prev_total_ms"] > 0


def test_openpi_replies_raw_with_actions(server: LocalServer) -> None:
    with open_ws(server, "/openpi/policy") as ws:
        ws.recv(timeout=5)
        ws.send(flat_request(request_id="op-1"))
        reply = msgpack_numpy.unpackb(ws.recv(timeout=10))
    assert reply["request_id"] == "op-1" and "data" not in reply
    assert isinstance(reply["actions"], np.ndarray)
    np.testing.assert_allclose(reply["actions"], expected(), rtol=1e-6)
    assert "infer_ms" in reply["server_timing"]


def test_realtime_error_is_a_map_with_its_status_then_a_close_carrying_it(
    server: LocalServer,
) -> None:
    with open_ws(server, "/v1/actions/realtime") as ws:
        ws.recv(timeout=5)
        ws.send(msgpack_numpy.packb({"input": {"observation": {"images": {"a": b"not a png"}}}}))
        error = msgpack_numpy.unpackb(ws.recv(timeout=10))
        assert set(error) == {"error", "status"} and error["status"] == 400
        assert "input.observation.images.a" in error["error"] and "Traceback" not in error["error"]
        assert closed_code(ws) == 4400


def test_text_frame_is_refused(server: LocalServer) -> None:
    with open_ws(server, "/v1/actions/realtime") as ws:
        ws.recv(timeout=5)
        ws.send("{}")
        assert "binary" in msgpack_numpy.unpackb(ws.recv(timeout=10))["error"]
        assert closed_code(ws) == 4400


def test_openpi_error_is_a_text_frame_and_the_server_keeps_serving(server: LocalServer) -> None:
    with open_ws(server, "/openpi/policy") as ws:
        ws.recv(timeout=5)
        ws.send(msgpack_numpy.packb({"observation.state": STATE}))
        message = ws.recv(timeout=10)
        assert isinstance(message, str) and "no camera images" in message
        assert "Traceback" not in message
        assert closed_code(ws) == 4400
    with open_ws(server, "/openpi/policy") as ws:
        ws.recv(timeout=5)
        ws.send(flat_request())
        assert "actions" in msgpack_numpy.unpackb(ws.recv(timeout=10))

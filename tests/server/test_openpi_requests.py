"""What reaches a server that speaks openpi's protocol as openpi's own server does: the exact
dict openpi's example client sends (its keys, dtypes and 224x224 frames), from `ActionClient`
and from ``vla-client send --layout``, on any URL path.

openpi's `WebsocketPolicyServer` is not in the openpi-client package, so `OpenpiLikeServer`
does what it does, with openpi's own packing (`openpi_client.msgpack_numpy`): send the policy's
metadata on connect, then unpack each message, hand the dict to the policy and send its reply.
Here the policy records the dict.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from openpi_examples import openpi_example_request

from digest_policy import DigestPolicy
from vla_client import ActionClient, ContractError, Observation
from vla_client.cli import main
from vla_client.protocol import LAYOUTS, OpenpiLayout
from vla_client.server import LocalServer, ServerConfig, create_app

msgpack_numpy = pytest.importorskip("openpi_client.msgpack_numpy")
image_tools = pytest.importorskip("openpi_client.image_tools")
sync_server = pytest.importorskip("websockets.sync.server")

RNG = np.random.default_rng(26)
ROBOT_LAYOUTS = ("droid", "libero", "aloha")


class OpenpiLikeServer:
    """openpi's websocket server loop around a policy that records each request."""

    def __init__(self, action_dim: int = 8) -> None:
        self.received: list[dict[str, Any]] = []
        self._action_dim = action_dim
        self._server = sync_server.serve(self._serve, "127.0.0.1", 0)
        self.port = self._server.socket.getsockname()[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _serve(self, connection: Any) -> None:
        connection.send(msgpack_numpy.packb({"policy": "recording"}))  # openpi: the metadata
        for message in connection:
            request = msgpack_numpy.unpackb(message)
            self.received.append(request)
            actions = np.zeros((10, self._action_dim), np.float32)
            connection.send(msgpack_numpy.packb({"actions": actions}))

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(10)


@pytest.fixture
def openpi_server() -> Iterator[OpenpiLikeServer]:
    server = OpenpiLikeServer()
    try:
        yield server
    finally:
        server.close()


def robot_observation(layout: OpenpiLayout, size: tuple[int, int]) -> Observation:
    """Frames as the layout's cameras give them, the state as a robot reads it (float64)."""
    frames = {name: RNG.integers(0, 256, (*size, 3), dtype=np.uint8) for name in layout.cameras}
    state = RNG.uniform(-1, 1, layout.state_dim or 6)  # float64, as the robot reports it
    return Observation(frames, state, task="put the marker in the cup")


def shapes_and_dtypes(value: Any) -> Any:
    """A request's structure: keys, and (shape, dtype) or the type for each value."""
    if isinstance(value, dict):
        return {key: shapes_and_dtypes(item) for key, item in value.items()}
    if isinstance(value, np.ndarray):
        return (value.shape, value.dtype.str)
    return type(value).__name__


@pytest.mark.parametrize("name", ROBOT_LAYOUTS)
def test_the_request_is_exactly_what_openpis_example_sends(
    openpi_server: OpenpiLikeServer, name: str
) -> None:
    layout = LAYOUTS[name]
    observation = robot_observation(layout, (224, 224))
    with ActionClient(f"ws://127.0.0.1:{openpi_server.port}", layout=name) as client:
        client.infer(observation)
    (received,) = openpi_server.received
    example = openpi_example_request(observation, name)
    assert shapes_and_dtypes(received) == shapes_and_dtypes(example)  # no request_id, float64
    for key, value in example.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(received[key], value)
    assert received["prompt"] == example["prompt"]


@pytest.mark.parametrize("name", ROBOT_LAYOUTS)
@pytest.mark.parametrize("resize", ["pad", "crop"])
def test_resize_uses_the_layouts_size_when_openpi_announces_none(
    openpi_server: OpenpiLikeServer, name: str, resize: str
) -> None:
    layout = LAYOUTS[name]
    observation = robot_observation(layout, (360, 640))
    with ActionClient(f"ws://127.0.0.1:{openpi_server.port}", layout=name, resize=resize) as c:
        c.infer(observation)
    (received,) = openpi_server.received
    frames = received["images"] if layout.images_field else received
    for camera, frame in observation.images.items():
        sent = frames[layout.image_key.format(camera=camera)]
        sent = np.moveaxis(sent, 0, -1) if layout.channels_first else sent
        assert sent.shape == (224, 224, 3)
        if resize == "pad":  # openpi's own resize, as its example client runs it on the robot
            np.testing.assert_array_equal(sent, image_tools.resize_with_pad(frame, 224, 224))


@pytest.mark.parametrize("resize", ["pad", "crop"])
def test_resize_with_no_size_from_anywhere_is_a_contract_error(
    openpi_server: OpenpiLikeServer, resize: str
) -> None:
    observation = Observation({"top": np.zeros((360, 640, 3), np.uint8)}, task="t")
    url = f"ws://127.0.0.1:{openpi_server.port}"
    client = ActionClient(url, layout="flat", resize=resize)
    with client, pytest.raises(ContractError, match="image_size=") as caught:
        client.infer(observation)
    assert caught.value.field == "input.image_size"
    with ActionClient(url, layout="flat", resize=resize, image_size=(96, 128)) as client:
        client.infer(observation)  # a size given: resized to it
    assert [r["observation.images.top"].shape for r in openpi_server.received] == [(96, 128, 3)]


def test_auto_leaves_frames_as_captured_on_openpi(openpi_server: OpenpiLikeServer) -> None:
    observation = robot_observation(LAYOUTS["droid"], (36, 48))
    with ActionClient(f"ws://127.0.0.1:{openpi_server.port}", layout="droid") as client:
        client.infer(observation)
    assert openpi_server.received[0]["observation/wrist_image_left"].shape == (36, 48, 3)


def test_send_with_a_layout_speaks_openpi_on_the_url_openpi_serves(
    openpi_server: OpenpiLikeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """``vla-client send ws://host:port --layout droid``: openpi's endpoint, as
    ``ActionClient(url, layout="droid")`` decides, with the layout's cameras, state and size."""
    code = main(["send", f"ws://127.0.0.1:{openpi_server.port}", "--layout", "droid", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    (received,) = openpi_server.received
    example = openpi_example_request(
        robot_observation(LAYOUTS["droid"], (224, 224)), "droid"
    )  # the keys and shapes openpi's DROID client sends, 224x224 frames
    assert shapes_and_dtypes(received) == shapes_and_dtypes(example)


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_send_with_a_layout_against_the_reference_server(
    scheme: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any URL of the server: the layout picks openpi's endpoint (and a websocket) by itself."""
    droid = LAYOUTS["droid"]
    policy = DigestPolicy(camera_names=droid.cameras, state_dim=droid.state_dim)
    with LocalServer(create_app(policy, ServerConfig(openpi_layout="droid"))) as server:
        code = main(["send", f"{scheme}://127.0.0.1:{server.port}", "--layout", "droid", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    sizes = json.loads(captured.out)["bytes_per_camera"]
    assert set(sizes) == set(droid.cameras)
    assert all(224 * 224 * 3 < size < 224 * 224 * 3 + 200 for size in sizes.values())  # + header

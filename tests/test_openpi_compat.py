"""openpi's own client, unmodified from PyPI, against our server.

`openpi-client` pins numpy<2, so it is installed with ``--no-deps`` (see .ci/run); its
`WebsocketClientPolicy` needs only msgpack, numpy and websockets, which we have.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from oracles import oracle_actions
from vla_client.cameras.scene import synthetic_frames
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.policy import PolicyInput

websocket_client_policy = pytest.importorskip("openpi_client.websocket_client_policy")
WebsocketClientPolicy = websocket_client_policy.WebsocketClientPolicy
# openpi's client opens its connection without a `with`, which websockets >= 17.1 warns about.
pytestmark = pytest.mark.filterwarnings("ignore:connect\\(\\) must be used:DeprecationWarning")

FRAMES = synthetic_frames(["base_0_rgb", "left_wrist_0_rgb"], 64, 64, seed=9)
STATE = np.arange(5, dtype=np.float32) / 10


@pytest.fixture(scope="module", params=["worker", "in_process"])
def server(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    """The server openpi's client talks to, in the default worker layout and in-process."""
    config = ServerConfig(in_process=request.param == "in_process", api_key="pi-key")
    with LocalServer(create_app(ReferencePolicy(action_horizon=10, action_dim=6), config)) as s:
        yield s


def observation() -> dict[str, object]:
    flat: dict[str, object] = {f"observation.images.{k}": v for k, v in FRAMES.items()}
    return {**flat, "observation.state": STATE, "prompt": "fold the towel"}


def test_openpi_client_infers_on_the_openpi_path(server: LocalServer) -> None:
    policy = WebsocketClientPolicy(f"ws://127.0.0.1:{server.port}/openpi/policy", api_key="pi-key")
    assert policy.get_server_metadata()["capabilities"]["openpi_websocket"] is True
    replies = [policy.infer(observation()) for _ in range(2)]
    want = oracle_actions(
        PolicyInput(images=dict(FRAMES), state=STATE, task="fold the towel"),
        horizon=10,
        action_dim=6,
    )
    np.testing.assert_allclose(replies[1]["actions"], want, rtol=1e-6)
    assert "infer_ms" in replies[0]["server_timing"]
    assert "prev_total_ms" in replies[1]["server_timing"]


def test_openpi_client_with_host_and_port(server: LocalServer) -> None:
    policy = WebsocketClientPolicy("127.0.0.1", server.port, api_key="pi-key")
    assert policy.infer(observation())["actions"].shape == (10, 6)


def test_openpi_client_raises_on_a_bad_observation(server: LocalServer) -> None:
    policy = WebsocketClientPolicy("127.0.0.1", server.port, api_key="pi-key")
    with pytest.raises(RuntimeError, match="no camera images"):
        policy.infer({"observation.state": STATE})

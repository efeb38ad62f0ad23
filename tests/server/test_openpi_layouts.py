"""The reference server speaks openpi's DROID, LIBERO and ALOHA layouts on ``/openpi/policy``.

The policy answers the SHA-256 of every frame it got, so each round trip proves the pixels
arrived unchanged against `hashlib` on the test's own frames. openpi's own client, sending the
dicts its example scripts send (written out here by hand), gets the same actions as vla-client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import pytest
from openpi_examples import openpi_example_request

from digest_policy import DigestPolicy, sha256_rows
from vla_client import ActionClient, AsyncActionClient, Observation
from vla_client.protocol import LAYOUTS, OpenpiLayout
from vla_client.server import LocalServer, ServerConfig, create_app

websocket_client_policy = pytest.importorskip("openpi_client.websocket_client_policy")
pytestmark = pytest.mark.filterwarnings("ignore:connect\\(\\) must be used:DeprecationWarning")
RNG = np.random.default_rng(21)


def robot_observation(layout: OpenpiLayout) -> Observation:
    names = layout.cameras or ("base_0_rgb", "left_wrist_0_rgb")
    frames = {name: RNG.integers(0, 256, (36, 48, 3), dtype=np.uint8) for name in names}
    state = np.linspace(-1, 1, layout.state_dim or 6, dtype=np.float32)
    return Observation(frames, state, task="put the cup in the sink")


@pytest.fixture(scope="module", params=sorted(LAYOUTS))
def served(request: pytest.FixtureRequest) -> Iterator[tuple[LocalServer, OpenpiLayout]]:
    layout = LAYOUTS[request.param]
    policy = DigestPolicy(camera_names=layout.cameras, state_dim=layout.state_dim)
    app = create_app(policy, ServerConfig(openpi_layout=layout.name))  # the worker layout
    with LocalServer(app) as server:
        yield server, layout


def test_the_metadata_says_which_layout(served) -> None:
    server, layout = served
    with ActionClient(f"ws://127.0.0.1:{server.port}", endpoint="openpi") as client:
        assert client.metadata().input.openpi_layout == layout.name


def test_vla_client_sends_each_layout_losslessly_sync_and_async(served) -> None:
    server, layout = served
    observation = robot_observation(layout)
    want = sha256_rows(dict(observation.images), observation.state)
    url = f"ws://127.0.0.1:{server.port}/openpi/policy"
    with ActionClient(url, layout=layout.name) as client:
        np.testing.assert_array_equal(client.infer(observation).actions, want)

    async def run() -> np.ndarray:
        async with AsyncActionClient(url, layout=layout.name) as client:
            return (await client.infer(observation)).actions

    np.testing.assert_array_equal(asyncio.run(run()), want)


def test_openpi_client_gets_the_same_actions_as_vla_client(served) -> None:
    server, layout = served
    observation = robot_observation(layout)
    policy = websocket_client_policy.WebsocketClientPolicy("127.0.0.1", server.port)
    theirs = policy.infer(openpi_example_request(observation, layout.name))["actions"]
    with ActionClient(f"ws://127.0.0.1:{server.port}", layout=layout.name) as client:
        ours = client.infer(observation).actions
    np.testing.assert_array_equal(theirs, ours)
    np.testing.assert_array_equal(ours, sha256_rows(dict(observation.images), observation.state))


def test_a_request_in_another_layout_is_refused_with_the_key_it_lacks(served) -> None:
    server, layout = served
    if layout.name == "flat":
        pytest.skip("the flat layout takes any camera names")
    policy = websocket_client_policy.WebsocketClientPolicy("127.0.0.1", server.port)
    other = "droid" if layout.name != "droid" else "libero"
    request = openpi_example_request(robot_observation(LAYOUTS[other]), other)
    with pytest.raises(RuntimeError, match=layout.name):
        policy.infer(request)

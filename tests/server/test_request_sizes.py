"""A request may ask a policy for at most what it announces: the chunk's length and the
denoising steps size the policy's work and the reply, so past the bound it is a 400 naming
the bound, at once, and the next request is served as usual.

Before, ``parameters.action_horizon = 10_000_000`` in an 850-byte request made the reference
policy build a 280 MB chunk, the entrypoint send 640 MB of JSON 40 s later, and every other
robot wait behind it. In the default worker layout, over HTTP and the realtime websocket.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from served import serve
from websockets.sync.client import connect

from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.protocol import GENERATIONS_PATH, encode_request, loads
from vla_client.server import LocalServer, ReferencePolicy
from vla_client.server.policy import PolicyInput, PolicySpec


class LongChunks(ReferencePolicy):
    """The reference policy, announcing chunks of up to 64 steps and up to 10 steps."""

    @property
    def spec(self) -> PolicySpec:
        return PolicySpec(
            family="long",
            action_horizon=16,
            action_dim=7,
            num_inference_steps=4,
            max_action_horizon=64,
            max_inference_steps=10,
        )

    def infer(self, observation: PolicyInput) -> np.ndarray:
        return np.zeros((observation.action_horizon or 16, 7), np.float32)


@pytest.fixture(scope="module")
def reference() -> Iterator[LocalServer]:
    server = serve(ReferencePolicy(), "worker")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def long_chunks() -> Iterator[LocalServer]:
    server = serve(LongChunks(), "worker")
    yield server
    server.stop()


def post(server: LocalServer, **parameters: int) -> httpx.Response:
    body, content_type = encode_request(
        Observation(images=synthetic_frames(1, 16, 16)), parameters=parameters
    )
    return httpx.post(
        server.url + GENERATIONS_PATH, content=body, headers={"content-type": content_type}
    )


def test_a_horizon_past_the_announced_one_is_refused_at_once_naming_the_bound(
    reference: LocalServer,
) -> None:
    started = time.monotonic()
    reply = post(reference, action_horizon=10_000_000)
    assert reply.status_code == 400
    assert reply.json()["detail"] == (
        "parameters.action_horizon: at most 16 (the metadata's output.action_horizon); got 10000000"
    )
    assert time.monotonic() - started < 10, "refused before the policy ran"
    assert post(reference, action_horizon=17).status_code == 400
    assert post(reference, action_horizon=16).status_code == 200
    assert len(post(reference, action_horizon=3).json()["data"][0]["action"]["values"]) == 3


def test_steps_past_the_announced_ones_are_refused(reference: LocalServer) -> None:
    reply = post(reference, num_inference_steps=1_000_000)
    assert reply.status_code == 400
    assert reply.json()["detail"] == (
        "parameters.num_inference_steps: at most 1 (the metadata's "
        "defaults.num_inference_steps); got 1000000"
    )
    assert post(reference, num_inference_steps=1).status_code == 200


def test_a_policy_announcing_larger_bounds_serves_up_to_them(long_chunks: LocalServer) -> None:
    metadata = httpx.get(long_chunks.url + "/v1/actions/metadata").json()
    assert metadata["output"]["max_action_horizon"] == 64
    assert metadata["defaults"]["max_inference_steps"] == 10
    assert post(long_chunks, action_horizon=64, num_inference_steps=10).status_code == 200
    too_long = post(long_chunks, action_horizon=65)
    assert too_long.status_code == 400
    assert "at most 64 (the metadata's output.max_action_horizon)" in too_long.json()["detail"]
    too_many = post(long_chunks, num_inference_steps=11)
    assert too_many.status_code == 400
    assert "at most 10 (the metadata's defaults.max_inference_steps)" in too_many.json()["detail"]


def test_the_realtime_websocket_refuses_the_same_and_the_server_serves_on(
    reference: LocalServer,
) -> None:
    frames = synthetic_frames(1, 16, 16)
    big, _ = encode_request(
        Observation(images=frames), wire="msgpack", parameters={"action_horizon": 10_000_000}
    )
    fine, _ = encode_request(Observation(images=frames), wire="msgpack")
    realtime = reference.url.replace("http", "ws", 1) + "/v1/actions/realtime"
    with connect(realtime) as ws:
        ws.recv()  # the metadata
        ws.send(big)
        refusal = loads(ws.recv(), "msgpack")  # then the close, 4000 + the status
        assert refusal["status"] == 400 and "at most 16" in refusal["error"]
    with connect(realtime) as ws:
        ws.recv()
        ws.send(fine)
        assert "data" in loads(ws.recv(), "msgpack")

"""The server half of real-time chunking: the guidance (schedule, weight, frozen rows), the
announcement, the echo on both wires, and refusals, against real servers on 127.0.0.1."""

from __future__ import annotations

import math
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from vla_client import ActionClient
from vla_client.protocol.rtc import RTCRequest
from vla_client.server import LocalServer, create_app
from vla_client.server.policies import ReachFlowPolicy, ReachPolicy
from vla_client.server.policies.flow import guidance_weight, prefix_weights
from vla_client.server.policy import PolicyInput
from vla_client.tasks.reach import ReachTask


@pytest.fixture(scope="module")
def flow_url() -> Iterator[str]:
    with LocalServer(create_app(ReachFlowPolicy())) as server:
        yield server.url


@pytest.fixture(scope="module")
def plain_url() -> Iterator[str]:
    with LocalServer(create_app(ReachPolicy())) as server:
        yield server.url


@pytest.fixture(scope="module")
def world() -> ReachTask:
    task = ReachTask()
    task.reset(3)
    return task


def policy_input(world: ReachTask, rtc: RTCRequest | None = None) -> PolicyInput:
    return PolicyInput(world.frames(), state=world.state(), task="t", rtc=rtc)


def test_the_schedule_is_the_papers() -> None:
    weights = prefix_weights(delay=3, end=8, horizon=12)
    assert list(weights[:3]) == [1.0, 1.0, 1.0]
    assert list(weights[8:]) == [0.0] * 4
    c = (8 - 5) / (8 - 3 + 1)  # row 5: c (e^c - 1) / (e - 1)
    assert weights[5] == pytest.approx(c * math.expm1(c) / math.expm1(1))
    assert all(np.diff(weights[3:9]) < 0)  # fades out
    assert prefix_weights(delay=6, end=4, horizon=8).tolist() == [1, 1, 1, 1, 0, 0, 0, 0]


def test_the_guidance_weight_is_clipped_at_beta() -> None:
    assert guidance_weight(0.0, 10.0) == 10.0
    tau = 0.5
    r2 = (1 - tau) ** 2 / (tau**2 + (1 - tau) ** 2)
    assert guidance_weight(tau, 10.0) == pytest.approx((1 - tau) / (tau * r2))
    assert guidance_weight(0.95, 5.0) == 5.0


def test_the_guided_chunk_is_the_prefix_on_the_frozen_rows(world: ReachTask) -> None:
    policy = ReachFlowPolicy()
    plain = policy.infer(policy_input(world))
    prefix = plain[4:] + np.float32(0.01)  # what an earlier chunk left to execute
    rtc = RTCRequest(prefix, inference_delay_steps=3, execution_horizon=4)
    guided = policy.infer(policy_input(world, rtc))
    np.testing.assert_array_equal(guided[:3], prefix[:3])
    assert guided.shape == plain.shape
    # Past the frozen rows guidance pulls towards the prefix, softly: closer than a fresh chunk
    # from the same noise would be on the first free row.
    assert np.abs(guided[3] - prefix[3]).max() < 0.05


def test_the_server_announces_rtc_and_echoes_it(flow_url: str, world: ReachTask) -> None:
    metadata = httpx.get(f"{flow_url}/v1/actions/metadata").json()
    announced = metadata["capabilities"]["rtc"]
    assert announced["supported"] is True and announced["max_guidance_weight"] == 5.0
    prefix = np.tile(world.robot.astype(np.float32), (6, 1))
    rtc = RTCRequest(prefix, 2, 10)
    with ActionClient(flow_url) as client:
        result = client.infer(_observation(world), rtc=rtc.parameters())
    assert result.raw["rtc"] == {
        "applied": True, "prefix_steps": 6, "inference_delay_steps": 2, "execution_horizon": 10
    }  # fmt: skip
    np.testing.assert_allclose(result.actions[:2], prefix[:2])


def test_the_openpi_websocket_reads_the_rtc_keys(flow_url: str, world: ReachTask) -> None:
    prefix = np.tile(world.robot.astype(np.float32), (5, 1))
    rtc = RTCRequest(prefix, 3, 8)
    url = flow_url.replace("http://", "ws://")
    with ActionClient(url, endpoint="openpi") as client:
        result = client.infer(_observation(world), rtc=rtc.parameters())
    assert result.raw["rtc"]["inference_delay_steps"] == 3
    assert result.raw["rtc"]["prefix_steps"] == 5
    np.testing.assert_allclose(result.actions[:3], prefix[:3])


def test_a_policy_without_rtc_refuses_it(plain_url: str, world: ReachTask) -> None:
    rtc = RTCRequest(np.zeros((4, 2), np.float32), 1, 4)
    body = _body(world, rtc.parameters())
    reply = httpx.post(f"{plain_url}/v1/actions/generations", json=body)
    assert reply.status_code == 400
    assert "does not do real-time chunking" in reply.json()["detail"]
    assert "rtc" not in httpx.get(f"{plain_url}/v1/actions/metadata").json()["capabilities"]


@pytest.mark.parametrize(
    ("rtc", "detail"),
    [
        ({"prefix_actions": [[0.1, 0.2, 0.3]], "inference_delay_steps": 1,
          "execution_horizon": 4}, "parameters.rtc.prefix_actions: must be [P, 2]"),
        ({"prefix_actions": [[0.1, 0.2]] * 17, "inference_delay_steps": 1,
          "execution_horizon": 4}, "17 rows; this server's chunks have at most 16"),
        ({"prefix_actions": [[0.1, "x"]], "inference_delay_steps": 1,
          "execution_horizon": 4}, "array of numbers"),
        ({"prefix_actions": [[0.1, 0.2]], "inference_delay_steps": -1,
          "execution_horizon": 4}, "inference_delay_steps: must be an integer in 0..1, got -1"),
        ({"prefix_actions": [[0.1, 0.2]] * 3, "inference_delay_steps": 4,
          "execution_horizon": 4}, "inference_delay_steps: must be an integer in 0..3, got 4"),
        ({"prefix_actions": [[0.1, 0.2]], "inference_delay_steps": 1,
          "execution_horizon": True}, "execution_horizon: must be an integer in 1..16"),
        ({"inference_delay_steps": 1, "execution_horizon": 4}, "is required with RTC"),
        ("yes", "parameters.rtc: must be an object"),
    ],
)  # fmt: skip
def test_bad_rtc_is_a_400_naming_the_field(
    flow_url: str, world: ReachTask, rtc: object, detail: str
) -> None:
    reply = httpx.post(f"{flow_url}/v1/actions/generations", json=_body(world, rtc))
    assert reply.status_code == 400
    assert detail in reply.json()["detail"]
    assert httpx.get(f"{flow_url}/health").status_code == 200  # still serving


def test_vla_client_serve_policy_reach_flow(world: ReachTask) -> None:
    """``vla-client serve --policy reach-flow``: the documented command serves the flow policy
    (its weights found in the package) and announces RTC."""
    import socket

    from serve_process import start_serve

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = start_serve(port, "--policy", "reach-flow")
    try:
        url = f"http://127.0.0.1:{port}"
        with ActionClient(url) as client:
            assert client.metadata().capabilities["rtc"]["supported"] is True
            result = client.infer(_observation(world))  # type: ignore[arg-type]
        assert result.actions.shape == (16, 2)
    finally:
        server.terminate()
        server.wait(30)


def _observation(world: ReachTask) -> object:
    from vla_client.observation import Observation

    return Observation(world.frames(), state=world.state(), task="t")


def _body(world: ReachTask, rtc: object) -> dict[str, object]:
    from vla_client.protocol import encode_request

    body, _ = encode_request(_observation(world), parameters={"rtc": rtc})  # type: ignore[arg-type]
    import json

    return dict(json.loads(body))

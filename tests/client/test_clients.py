"""The clients' contract: results, typed errors, and the async twin, against real servers."""

import asyncio
import socket
import time

import numpy as np
import pytest

from vla_client import (
    ActionClient,
    AsyncActionClient,
    ConnectError,
    InvalidObservationError,
    Observation,
    RequestTimeoutError,
    ServerError,
    VLAClientError,
)
from vla_client.server import (
    LocalServer,
    Policy,
    PolicyInput,
    PolicySpec,
    ReferencePolicy,
    create_app,
)


class SlowPolicy(Policy):
    spec = PolicySpec(family="slow", action_horizon=2, action_dim=2)

    def infer(self, observation: PolicyInput) -> np.ndarray:
        time.sleep(1.0)
        return np.zeros((2, 2), np.float32)


class BrokenPolicy(Policy):
    spec = PolicySpec(family="broken", action_horizon=2, action_dim=2)

    def infer(self, observation: PolicyInput) -> np.ndarray:
        raise RuntimeError("secret internal state /home/user/model.ckpt")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_async_client_matches_sync_client(server_url, observation):
    async def run() -> np.ndarray:
        async with AsyncActionClient(server_url, encoding="raw", wire="msgpack") as client:
            metadata = await client.metadata()
            assert metadata.output.action_horizon == 10
            results = await asyncio.gather(*(client.infer(observation) for _ in range(4)))
            assert len({r.request_id for r in results}) == 4
            return results[0].actions

    with ActionClient(server_url, encoding="raw", wire="msgpack") as client:
        expected = client.infer(observation).actions
    np.testing.assert_array_equal(asyncio.run(run()), expected)


def test_connection_refused_is_a_connect_error(observation):
    with (
        ActionClient(f"http://127.0.0.1:{free_port()}", timeout_s=2) as client,
        pytest.raises(ConnectError),
    ):
        client.infer(observation)


def test_slow_server_is_a_timeout(observation):
    with (
        LocalServer(create_app(SlowPolicy())) as server,
        ActionClient(server.url, timeout_s=0.3) as client,
        pytest.raises(RequestTimeoutError),
    ):
        client.infer(observation)


def test_policy_failure_is_a_500_without_internals(observation):
    with (
        LocalServer(create_app(BrokenPolicy())) as server,
        ActionClient(server.url) as client,
        pytest.raises(ServerError) as info,
    ):
        client.infer(observation)
    assert info.value.status_code == 500
    assert "secret" not in info.value.detail and "Traceback" not in info.value.detail


def test_the_server_names_unknown_and_missing_cameras(frames):
    policy = ReferencePolicy(camera_names=("wrist", "left"), state_dim=3)
    with (
        LocalServer(create_app(policy)) as server,
        ActionClient(server.url, check_contract=False) as client,
    ):
        with pytest.raises(
            ServerError, match=r"unknown cameras \['right'\], missing cameras \['left'\]"
        ) as info:
            client.infer(Observation({"wrist": frames["wrist"], "right": frames["right"]}))
        assert info.value.status_code == 400
        with pytest.raises(ServerError, match="expected 3 values"):
            client.infer(
                Observation({"wrist": frames["wrist"], "left": frames["left"]}, state=[1.0])
            )
        ok = client.infer(
            Observation({"wrist": frames["wrist"], "left": frames["left"]}, state=[1.0, 2, 3])
        )
        assert ok.actions.shape == (16, 7)


def test_every_client_error_shares_one_base():
    for error in (ConnectError, RequestTimeoutError, ServerError, InvalidObservationError):
        assert issubclass(error, VLAClientError)


def test_infer_refuses_things_that_are_not_observations(server_url, frames):
    with ActionClient(server_url) as client, pytest.raises(TypeError, match="Observation"):
        client.infer(frames)  # type: ignore[arg-type]

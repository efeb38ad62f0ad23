"""The same server failure is the same `ServerError` over every transport, and retried alike."""

from __future__ import annotations

import asyncio

import pytest
from runners import TRANSPORTS, FlakyRunner, client_for, serve

from vla_client.client import AsyncActionClient
from vla_client.errors import InferenceError, ServerError
from vla_client.observation import Observation
from vla_client.transports import NO_RETRY


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_a_503_with_retry_after_is_retried_on_every_transport(
    transport: str, small_observation: Observation
) -> None:
    runner = FlakyRunner(InferenceError(503, "worker restarting", retry_after=0.05), failures=1)
    with serve(runner) as server, client_for(server, transport) as client:
        result = client.infer(small_observation)
        assert result.actions.shape == (4, 3)
        assert client.stats.retries == 1
    assert runner.calls == 2


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_the_error_carries_status_retry_after_and_request_id_on_every_transport(
    transport: str, small_observation: Observation
) -> None:
    runner = FlakyRunner(InferenceError(503, "worker restarting", retry_after=0.05), failures=1)
    with serve(runner) as server, client_for(server, transport, retry=NO_RETRY) as client:
        with pytest.raises(ServerError) as caught:
            client.infer(small_observation, request_id="req-7")
        assert (caught.value.status_code, caught.value.retry_after) == (503, 0.05)
        assert caught.value.retryable and "worker restarting" in caught.value.detail
        assert caught.value.request_id == "req-7"
        assert client.infer(small_observation).actions.shape == (4, 3)  # and it goes on


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
@pytest.mark.parametrize(
    ("error", "status"),
    [(InferenceError(500, "policy failed (ValueError)"), 500), (InferenceError(504, "slow"), 504)],
)
def test_a_failure_that_is_not_worth_waiting_for_is_raised_at_once(
    transport: str, error: InferenceError, status: int, small_observation: Observation
) -> None:
    runner = FlakyRunner(error, failures=1)
    with serve(runner) as server, client_for(server, transport) as client:
        with pytest.raises(ServerError) as caught:
            client.infer(small_observation)
        assert caught.value.status_code == status and not caught.value.retryable
        assert client.stats.retries == 0
    assert runner.calls == 1


def test_bad_input_is_a_400_over_the_websocket_too(small_observation: Observation) -> None:
    runner = FlakyRunner(InferenceError(503, "unused"), failures=0)
    with serve(runner) as server:
        for transport in sorted(TRANSPORTS):
            with client_for(server, transport) as client, pytest.raises(ServerError) as caught:
                client.infer(small_observation, action_horizon=0)
            assert caught.value.status_code == 400, transport
            assert "action_horizon" in caught.value.detail, transport


def test_the_async_client_reads_websocket_errors_alike(small_observation: Observation) -> None:
    runner = FlakyRunner(InferenceError(503, "worker restarting", retry_after=0.05), failures=2)

    async def run(url: str) -> tuple[int, float | None, int]:
        async with AsyncActionClient(url, retry=NO_RETRY) as strict:
            with pytest.raises(ServerError) as caught:
                await strict.infer(small_observation)
        async with AsyncActionClient(url) as client:
            await client.infer(small_observation)
            return caught.value.status_code, caught.value.retry_after, client.stats.retries

    with serve(runner) as server:
        assert asyncio.run(run(f"ws://127.0.0.1:{server.port}")) == (503, 0.05, 1)

"""Bounded HTTP retries: connect failures and 503 + Retry-After only, against real servers."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from runners import FlakyRunner, SlowRunner, serve

from timing import LATE_S
from vla_client.client import ActionClient, AsyncActionClient
from vla_client.errors import (
    ConnectError,
    DeadlineExceededError,
    InferenceError,
    RequestTimeoutError,
    ServerError,
)
from vla_client.observation import Observation
from vla_client.transports import Backoff, RetryPolicy


def test_backoff_grows_and_is_capped() -> None:
    backoff = Backoff(initial_s=0.1, max_s=0.5, multiplier=2)
    assert [backoff.delay(n) for n in (1, 2, 3, 4)] == [0.1, 0.2, 0.4, 0.5]


def test_503_with_retry_after_is_retried(small_observation: Observation) -> None:
    runner = FlakyRunner(InferenceError(503, "busy", retry_after=0), failures=2)
    with serve(runner) as server, ActionClient(server.url) as client:
        result = client.infer(small_observation)
        assert client.stats.retries == 2
    assert runner.calls == 3 and result.actions.shape == (4, 3)


def test_the_async_client_waits_out_a_503_on_the_event_loop(small_observation: Observation) -> None:
    """The wait before each retry is `asyncio.sleep` (`adrive`'s `Sleep`), and the retried call
    succeeds as the blocking client's does."""
    runner = FlakyRunner(InferenceError(503, "busy", retry_after=0), failures=2)

    async def run(url: str) -> tuple[tuple[int, ...], int]:
        async with AsyncActionClient(url) as client:
            result = await client.infer(small_observation)
            return result.actions.shape, client.stats.retries

    with serve(runner) as server:
        assert asyncio.run(run(server.url)) == ((4, 3), 2)
    assert runner.calls == 3


@pytest.mark.parametrize(
    "error", [InferenceError(503, "busy"), InferenceError(500, "policy failed")]
)
def test_other_failures_are_not_retried(
    error: InferenceError, small_observation: Observation
) -> None:
    runner = FlakyRunner(error, failures=1)
    with serve(runner) as server, ActionClient(server.url) as client:
        with pytest.raises(ServerError):
            client.infer(small_observation)
        assert client.stats.retries == 0
    assert runner.calls == 1


def test_retry_after_beyond_the_budget_is_not_waited_for(small_observation: Observation) -> None:
    runner = FlakyRunner(InferenceError(503, "busy", retry_after=30), failures=1)
    with (
        serve(runner) as server,
        ActionClient(server.url) as client,
        pytest.raises(ServerError) as info,
    ):
        client.infer(small_observation)
    assert info.value.retry_after == 30 and runner.calls == 1


def test_connect_failures_are_retried_a_bounded_number_of_times(
    small_observation: Observation,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    policy = RetryPolicy(max_attempts=4, max_total_s=5.0, backoff=Backoff(initial_s=0.01))
    with ActionClient(f"http://127.0.0.1:{port}", retry=policy) as client:
        with pytest.raises(ConnectError):
            client.infer(small_observation)
        assert client.stats.retries == 3


def test_the_deadline_bounds_an_http_call_shorter_than_its_timeout(
    small_observation: Observation,
) -> None:
    with (
        serve(SlowRunner(2.0)) as server,
        ActionClient(server.url, deadline_s=0.3, timeout_s=4.0) as client,
    ):
        start = time.monotonic()
        with pytest.raises(DeadlineExceededError, match=r"deadline of 0\.3 s"):
            client.infer(small_observation)
        assert time.monotonic() - start < 0.3 + LATE_S  # the deadline, not the server's 2 s
        assert client.stats.late_replies == 1


def test_the_deadline_bounds_an_async_http_call(small_observation: Observation) -> None:
    async def run(url: str) -> float:
        async with AsyncActionClient(url, deadline_s=0.3, timeout_s=4.0) as client:
            start = time.monotonic()
            with pytest.raises(DeadlineExceededError):
                await client.infer(small_observation)
            assert client.stats.late_replies == 1
            return time.monotonic() - start

    with serve(SlowRunner(2.0)) as server:
        assert asyncio.run(run(server.url)) < 0.3 + LATE_S


def test_without_a_deadline_the_timeout_is_a_plain_timeout(small_observation: Observation) -> None:
    with serve(SlowRunner(2.0)) as server, ActionClient(server.url, timeout_s=0.3) as client:
        with pytest.raises(RequestTimeoutError) as caught:
            client.infer(small_observation)
        assert not isinstance(caught.value, DeadlineExceededError)
        assert caught.value.request_id is None or caught.value.request_id.startswith("act_")

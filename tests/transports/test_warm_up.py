"""Waiting for a server that is warming up (issue 37, item 6), on both clients.

The reference server answers 503 ``the policy is loading`` with ``Retry-After`` until its
policy is ready, before any work on the request: the client asks again, as often as the server
says, for up to `RetryPolicy.warm_up_s` and never past the request's deadline, apart from the
few retries `max_attempts` allows a warm server. A warm-up that outlasts the wait is a timeout
that says the server was still warming up. SGLang's 503 ``{"error": ...}`` (its scheduler
died: "restart the server") is no warm-up and is raised after the one request.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pytest
from runners import TRANSPORTS, FlakyRunner, infer_once, serve

from raw_http_server import RawHTTPServer, RawRequest
from vla_client.client import ActionClient, AsyncActionClient
from vla_client.errors import (
    DeadlineExceededError,
    InferenceError,
    RequestTimeoutError,
    ServerError,
)
from vla_client.observation import Observation
from vla_client.protocol.status import POLICY_LOADING
from vla_client.transports import Backoff, RetryPolicy

FAST = RetryPolicy(max_attempts=2, max_total_s=5.0, backoff=Backoff(initial_s=0.01, max_s=0.05))
"""Two attempts at a warm server, quick polls of a warming one (the server says 0.01 s)."""
LOADING = InferenceError(503, POLICY_LOADING, retry_after=0.01)
CLIENTS = ["sync", "async"]


def infer(
    client_kind: str, server: Any, transport: str, observation: Observation, **options: Any
) -> tuple[Any, int]:
    """One `infer` with `FAST`: (the result or the error raised, the client's retry count)."""
    return infer_once(client_kind, server, transport, observation, **{"retry": FAST, **options})


@pytest.mark.parametrize("client_kind", CLIENTS)
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_a_request_waits_out_the_warm_up_past_max_attempts(
    client_kind: str, transport: str, small_observation: Observation
) -> None:
    runner = FlakyRunner(LOADING, failures=6)  # three times what `FAST` retries a warm server
    with serve(runner) as server:
        outcome, retries = infer(client_kind, server, transport, small_observation)
    assert not isinstance(outcome, Exception), outcome
    assert outcome.actions.shape == (4, 3)
    assert (runner.calls, retries) == (7, 6)


@pytest.mark.parametrize("client_kind", CLIENTS)
@pytest.mark.parametrize("transport", ["http", "realtime"])
def test_a_warm_up_that_never_ends_is_a_timeout_naming_it(
    client_kind: str, transport: str, small_observation: Observation
) -> None:
    runner = FlakyRunner(LOADING, failures=10**9)
    policy = RetryPolicy(max_attempts=2, warm_up_s=0.3, backoff=Backoff(0.01, 0.05))
    with serve(runner) as server:
        started = time.monotonic()
        outcome, _ = infer(client_kind, server, transport, small_observation, retry=policy)
        took = time.monotonic() - started
    assert type(outcome) is RequestTimeoutError, outcome
    assert "still warming up after" in str(outcome) and "warm_up_s" in str(outcome)
    assert POLICY_LOADING in str(outcome) and outcome.request_id is not None
    assert isinstance(outcome.__cause__, ServerError) and runner.calls > 2
    assert took >= 0.25  # it waited (about) warm_up_s, not the two attempts of a warm server


@pytest.mark.parametrize("client_kind", CLIENTS)
@pytest.mark.parametrize("transport", ["http", "openpi"])
def test_the_deadline_ends_the_wait_for_warm_up(
    client_kind: str, transport: str, small_observation: Observation
) -> None:
    runner = FlakyRunner(LOADING, failures=10**9)
    with serve(runner) as server:
        outcome, _ = infer(client_kind, server, transport, small_observation, deadline_s=1.0)
    # Ended by the wait (the next would pass the deadline) or by the attempt after it.
    assert type(outcome) is DeadlineExceededError, outcome
    assert "still warming up" in str(outcome) and "deadline_s" in str(outcome)
    assert runner.calls > 2


def warming_server(
    warm_up_requests: int, retry_after_s: float
) -> Callable[[RawRequest, socket.socket], None]:
    """Answers its first `warm_up_requests` requests as a server warming up, with SGLang's
    ``{"error": ...}`` body, then the metadata (GET) or a chunk (POST)."""
    answered: list[int] = []

    def answer(request: RawRequest, conn: socket.socket) -> None:
        answered.append(1)
        status, extra = "200 OK", ""
        if len(answered) <= warm_up_requests:
            status, extra = "503 Service Unavailable", f"Retry-After: {retry_after_s:g}\r\n"
            body = orjson.dumps({"error": POLICY_LOADING})
        elif request.line.startswith("GET"):
            body = orjson.dumps({"output": {"action_horizon": 2, "action_dim": 3}})
        else:
            request_id = orjson.loads(request.body)["request_id"]
            body = orjson.dumps({"request_id": request_id, "actions": np.ones((2, 3)).tolist()})
        head = (
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        conn.sendall(head.encode() + body)

    return answer


@pytest.mark.parametrize("client_kind", CLIENTS)
@pytest.mark.parametrize("call", ["metadata", "infer"])
def test_retry_after_is_honoured_while_warming_up(client_kind: str, call: str) -> None:
    arrivals: list[float] = []
    answer = warming_server(warm_up_requests=3, retry_after_s=0.2)

    def timed(request: RawRequest, conn: socket.socket) -> None:
        arrivals.append(time.monotonic())
        answer(request, conn)

    observation = Observation({"wrist": np.zeros((8, 8, 3), np.uint8)})
    options: dict[str, Any] = {"retry": RetryPolicy(max_attempts=1), "check_contract": False}
    with RawHTTPServer(timed) as server:
        if client_kind == "sync":
            with ActionClient(server.url, **options) as client:
                got = client.metadata() if call == "metadata" else client.infer(observation)
        else:

            async def run() -> Any:
                async with AsyncActionClient(server.url, **options) as client:
                    if call == "metadata":
                        return await client.metadata()
                    return await client.infer(observation)

            got = asyncio.run(run())
    if call == "metadata":
        assert got.output.action_horizon == 2
    else:
        np.testing.assert_array_equal(got.actions, np.ones((2, 3), np.float32))
    assert len(arrivals) == 4
    waits = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert min(waits) >= 0.2  # never sooner than the server asked


@pytest.mark.parametrize("client_kind", CLIENTS)
def test_sglangs_scheduler_failure_is_not_waited_for(client_kind: str) -> None:
    """SGLang answers every POST 503 ``{"error": reason}`` once its scheduler died, for good:
    the client shows it after the one request, whatever its retry policy."""
    body = b'{"error": "Scheduler worker exited; restart the server."}'

    def answer(request: RawRequest, conn: socket.socket) -> None:
        head = (
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        conn.sendall(head.encode() + body)

    observation = Observation({"wrist": np.zeros((8, 8, 3), np.uint8)})
    with RawHTTPServer(answer) as server, pytest.raises(ServerError) as raised:
        if client_kind == "sync":
            with ActionClient(server.url, check_contract=False) as client:
                client.infer(observation)
        else:

            async def run() -> None:
                async with AsyncActionClient(server.url, check_contract=False) as client:
                    await client.infer(observation)

            asyncio.run(run())
    assert raised.value.detail == "Scheduler worker exited; restart the server."
    assert len(server.requests) == 1

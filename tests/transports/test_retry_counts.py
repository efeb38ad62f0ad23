"""How many times a request reaches the server, for each kind of failure, on every transport.

The policy (`vla_client.transports.retry`): only a connection that never opened and a 503 with
``Retry-After`` are retried, up to `RetryPolicy.max_attempts`; a read timeout, a 503 without
``Retry-After``, a 500 and any 4xx are raised after the one request. The runners count the
requests that reached them, so these tests see what the server received, not what the client
reports: a client that retried a read timeout would run the policy twice on one observation.
Every case runs with the blocking and the asyncio client, over HTTP and both websockets.
"""

from __future__ import annotations

import socket
from types import SimpleNamespace
from typing import Any

import pytest
from runners import (
    TRANSPORTS,
    FlakyRunner,
    SlowRunner,
    infer_once,
    serve,
)

from vla_client.errors import (
    ConnectError,
    InferenceError,
    RequestTimeoutError,
    ServerError,
)
from vla_client.observation import Observation
from vla_client.transports import Backoff, RetryPolicy

ATTEMPTS = 4
POLICY = RetryPolicy(max_attempts=ATTEMPTS, max_total_s=5.0, backoff=Backoff(initial_s=0.01))
CLIENTS = ["sync", "async"]


def infer(
    client_kind: str, server: Any, transport: str, observation: Observation, **options: Any
) -> tuple[Any, int]:
    """One `infer` with `POLICY`: (the result or the error raised, the client's retry count)."""
    return infer_once(client_kind, server, transport, observation, **{"retry": POLICY, **options})


@pytest.mark.parametrize("client_kind", CLIENTS)
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
@pytest.mark.parametrize(
    ("failures", "calls"), [(2, 3), (100, ATTEMPTS)], ids=["then-served", "every-time"]
)
def test_a_503_with_retry_after_is_sent_again_up_to_max_attempts(
    failures: int, calls: int, client_kind: str, transport: str, small_observation: Observation
) -> None:
    runner = FlakyRunner(InferenceError(503, "restarting", retry_after=0.01), failures=failures)
    with serve(runner) as server:
        outcome, retries = infer(client_kind, server, transport, small_observation)
    assert (runner.calls, retries) == (calls, calls - 1)
    if failures < ATTEMPTS:
        assert not isinstance(outcome, Exception), outcome
        assert outcome.actions.shape == (4, 3)
    else:
        assert isinstance(outcome, ServerError) and outcome.status_code == 503


@pytest.mark.parametrize("client_kind", CLIENTS)
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
@pytest.mark.parametrize(
    "error",
    [
        InferenceError(503, "busy, no Retry-After"),
        InferenceError(500, "policy failed"),
        InferenceError(400, "bad observation"),
        InferenceError(429, "slow down", retry_after=0.01),  # a 4xx, even with Retry-After
    ],
    ids=["503", "500", "400", "429-retry-after"],
)
def test_other_server_errors_reach_the_server_once(
    error: InferenceError, client_kind: str, transport: str, small_observation: Observation
) -> None:
    runner = FlakyRunner(error, failures=100)
    with serve(runner) as server:
        outcome, retries = infer(client_kind, server, transport, small_observation)
    assert isinstance(outcome, ServerError), outcome
    assert outcome.status_code == error.status_code
    assert (runner.calls, retries) == (1, 0)


@pytest.mark.parametrize("client_kind", CLIENTS)
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_a_read_timeout_is_not_sent_again_though_the_server_got_it(
    client_kind: str, transport: str, small_observation: Observation
) -> None:
    runner = SlowRunner(delay_s=1.0)
    with serve(runner) as server:
        outcome, retries = infer(client_kind, server, transport, small_observation, timeout_s=0.3)
    # Counted after the server stopped, so a second request in flight would have arrived.
    assert isinstance(outcome, RequestTimeoutError), outcome
    assert (runner.calls, retries) == (1, 0)


@pytest.mark.parametrize("client_kind", CLIENTS)
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_a_refused_connection_is_tried_max_attempts_times(
    client_kind: str, transport: str, small_observation: Observation
) -> None:
    with socket.socket() as sock:  # a port nobody listens on: every connect is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    nobody = SimpleNamespace(url=f"http://127.0.0.1:{port}", port=port)
    outcome, retries = infer(client_kind, nobody, transport, small_observation)
    assert isinstance(outcome, ConnectError) and outcome.sent is False, outcome
    assert retries == ATTEMPTS - 1

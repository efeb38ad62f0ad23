"""RetryPolicy, Backoff and the retry loops on their own: which errors, how often, how long.

The documented policy: only a connection that never opened (`ConnectError` with
``sent=False``) and a 503 with ``Retry-After`` are retried; at most `max_attempts` attempts;
no wait that would pass `max_total_s` or the caller's budget. The loops run here with a
recorded sleep (sync) or a real, tiny one (asyncio), so the delays are checked exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from vla_client.errors import (
    ConnectError,
    InferenceError,
    ProtocolError,
    RequestTimeoutError,
    ServerError,
)
from vla_client.transports import NO_RETRY, Backoff, RetryPolicy
from vla_client.transports.retry import aretrying, retrying

POLICY = RetryPolicy(max_attempts=4, max_total_s=5.0, backoff=Backoff(0.01, 1.0, 3.0))


def test_backoff_defaults_and_growth() -> None:
    backoff = Backoff()
    assert (backoff.initial_s, backoff.max_s, backoff.multiplier) == (0.05, 2.0, 2.0)
    assert [backoff.delay(n) for n in (1, 2, 3, 6, 7)] == [0.05, 0.1, 0.2, 1.6, 2.0]
    assert backoff.delay(0) == backoff.delay(1) == 0.05  # never below the first delay
    assert isinstance(Backoff(1, 10, 2).delay(2), float)
    assert Backoff(0.01, 1.0, 3.0).delay(3) == pytest.approx(0.09)


def test_policy_defaults() -> None:
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.max_total_s, policy.backoff) == (3, 5.0, Backoff())
    assert NO_RETRY.max_attempts == 1
    assert NO_RETRY.next_delay(ConnectError("refused", sent=False), 1, 0.0) is None


@pytest.mark.parametrize(("attempts", "expected"), [(1, 0.01), (2, 0.03), (3, 0.09), (4, None)])
def test_a_connect_that_never_opened_waits_the_backoff(attempts: int, expected: float) -> None:
    delay = POLICY.next_delay(ConnectError("refused", sent=False), attempts, 0.0)
    assert delay == pytest.approx(expected) if expected is not None else delay is None


def test_a_connect_error_waits_at_least_its_retry_after() -> None:
    error = ConnectError("backing off", sent=False, retry_after=0.5)
    assert POLICY.next_delay(error, 1, 0.0) == 0.5
    small = ConnectError("backing off", sent=False, retry_after=0.001)
    assert POLICY.next_delay(small, 1, 0.0) == 0.01


@pytest.mark.parametrize("retry_after", [0.0, 0.2, 4.0])
def test_a_503_with_retry_after_waits_exactly_that(retry_after: float) -> None:
    error = ServerError(503, "busy", retry_after=retry_after)
    assert POLICY.next_delay(error, 1, 0.0) == retry_after
    assert POLICY.next_delay(error, 3, 0.0) == retry_after
    assert POLICY.next_delay(error, 4, 0.0) is None


@pytest.mark.parametrize(
    "error",
    [
        ConnectError("reset after sending", sent=True),
        RequestTimeoutError("no reply"),
        ServerError(503, "busy"),
        ServerError(500, "bug", retry_after=0.1),
        ServerError(429, "slow down", retry_after=0.1),
        ServerError(400, "bad"),
        ProtocolError("garbage"),
        ValueError("not a transport error"),
    ],
    ids=[
        "sent",
        "timeout",
        "503",
        "500-retry-after",
        "429-retry-after",
        "400",
        "protocol",
        "other",
    ],
)
def test_everything_else_is_never_retried(error: Exception) -> None:
    assert POLICY.next_delay(error, 1, 0.0) is None


def test_no_wait_passes_max_total_s() -> None:
    error = ServerError(503, "busy", retry_after=1.0)
    assert POLICY.next_delay(error, 1, 4.0) == 1.0  # ends exactly at 5 s: allowed
    assert POLICY.next_delay(error, 1, 4.0 + 1e-9) is None
    refused = ConnectError("refused", sent=False)
    assert POLICY.next_delay(refused, 1, 4.99) == 0.01
    assert POLICY.next_delay(refused, 1, 4.999) is None


class Script:
    """A call that raises the given errors in turn, then returns its attempt number."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.calls


def test_retrying_sleeps_the_delays_and_counts_each_retry() -> None:
    sleeps: list[float] = []
    retried: list[Exception] = []
    refused = ConnectError("refused", sent=False)
    busy = ServerError(503, "busy", retry_after=0.2)
    call = Script(refused, busy, refused)
    result = retrying(call, POLICY, on_retry=retried.append, sleep=sleeps.append)
    assert result == 4 and call.calls == 4
    assert sleeps == pytest.approx([0.01, 0.2, 0.09])
    assert retried == [refused, busy, refused]


def test_retrying_stops_after_max_attempts_with_the_last_error() -> None:
    sleeps: list[float] = []
    errors = [ConnectError(f"refused {i}", sent=False) for i in range(10)]
    call = Script(*errors)
    with pytest.raises(ConnectError, match="refused 3"):
        retrying(call, POLICY, sleep=sleeps.append)
    assert call.calls == 4 and len(sleeps) == 3


def test_retrying_raises_what_is_not_retried_at_once() -> None:
    sleeps: list[float] = []
    call = Script(RequestTimeoutError("no reply"))
    with pytest.raises(RequestTimeoutError):
        retrying(call, POLICY, sleep=sleeps.append)
    assert call.calls == 1 and sleeps == []
    other = Script(InferenceError(503, "not a client error"))
    with pytest.raises(InferenceError):  # not a TransportError or ServerError: not caught
        retrying(other, POLICY, sleep=sleeps.append)
    assert other.calls == 1 and sleeps == []


@pytest.mark.parametrize(("budget_s", "calls"), [(0.05, 1), (0.2, 2), (None, 2)])
def test_retrying_keeps_within_the_budget(budget_s: float | None, calls: int) -> None:
    """A wait of 0.1 s fits a 0.2 s budget, not a 0.05 s one."""
    sleeps: list[float] = []
    call = Script(ServerError(503, "busy", retry_after=0.1))
    if calls == 1:
        with pytest.raises(ServerError):
            retrying(call, POLICY, budget_s=budget_s, sleep=sleeps.append)
    else:
        assert retrying(call, POLICY, budget_s=budget_s, sleep=sleeps.append) == 2
    assert call.calls == calls and sleeps == [0.1] * (calls - 1)


def test_the_budget_counts_the_time_already_spent() -> None:
    """Elapsed time comes from the clock, so slow attempts use up the budget."""
    import time

    def slow(call: Callable[[], int]) -> Callable[[], int]:
        def run() -> int:
            time.sleep(0.06)
            return call()

        return run

    sleeps: list[float] = []
    call = Script(ServerError(503, "busy", retry_after=0.05), ServerError(503, "busy",
                  retry_after=0.05))  # fmt: skip
    with pytest.raises(ServerError):  # 0.06 + 0.05 fits 0.15; 0.06 + 0.05 + 0.06 + 0.05 no
        retrying(slow(call), POLICY, budget_s=0.15, sleep=sleeps.append)
    assert call.calls == 2 and sleeps == [0.05]


def test_aretrying_retries_as_retrying_does() -> None:
    retried: list[Exception] = []
    busy = ServerError(503, "busy", retry_after=0.0)
    call = Script(busy, ConnectError("refused", sent=False))

    async def attempt() -> int:
        return call()

    result = asyncio.run(aretrying(attempt, POLICY, on_retry=retried.append))
    assert result == 3 and len(retried) == 2 and retried[0] is busy
    timeout = Script(RequestTimeoutError("no reply"))

    async def timing_out() -> int:
        return timeout()

    with pytest.raises(RequestTimeoutError):
        asyncio.run(aretrying(timing_out, POLICY))
    assert timeout.calls == 1
    many = Script(*[ServerError(503, "busy", retry_after=0.0) for _ in range(9)])

    async def busy_forever() -> int:
        return many()

    with pytest.raises(ServerError):
        asyncio.run(aretrying(busy_forever, POLICY, budget_s=1.0))
    assert many.calls == 4


def test_a_wait_that_ends_exactly_at_the_budget_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a frozen clock: elapsed 0, a 0.25 s wait, a 0.25 s budget: it fits, as max_total_s."""
    import vla_client.transports.retry as retry_module

    monkeypatch.setattr(retry_module, "time", SimpleNamespace(monotonic=lambda: 100.0))
    sleeps: list[float] = []
    call = Script(ServerError(503, "busy", retry_after=0.25))
    assert retrying(call, POLICY, budget_s=0.25, sleep=sleeps.append) == 2
    call = Script(ServerError(503, "busy", retry_after=0.25 + 2**-40))
    with pytest.raises(ServerError):
        retrying(call, POLICY, budget_s=0.25, sleep=sleeps.append)
    assert sleeps == [0.25]


def test_aretrying_keeps_within_the_budget() -> None:
    call = Script(ServerError(503, "busy", retry_after=0.1))

    async def attempt() -> int:
        return call()

    with pytest.raises(ServerError):
        asyncio.run(aretrying(attempt, POLICY, budget_s=0.05))
    assert call.calls == 1
    assert asyncio.run(aretrying(attempt, POLICY, budget_s=0.5)) == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"initial_s": -0.001}, "initial_s must be a number >= 0; got -0.001"),
        ({"max_s": -1}, "max_s must be a number >= 0; got -1"),
        ({"multiplier": 0.999}, "multiplier must be a number >= 1; got 0.999"),
        ({"multiplier": "2"}, "multiplier must be a number >= 1; got '2'"),
    ],
)
def test_a_backoff_option_out_of_range_is_refused_by_name(options, message) -> None:
    with pytest.raises(ValueError) as caught:
        Backoff(**options)
    assert str(caught.value) == message


def test_a_backoff_takes_each_option_at_its_lowest() -> None:
    backoff = Backoff(initial_s=0, max_s=0, multiplier=1)
    assert backoff.delay(1) == backoff.delay(5) == 0.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_attempts": 0}, "max_attempts must be an integer >= 1; got 0"),
        ({"max_attempts": 2.0}, "max_attempts must be an integer >= 1; got 2.0"),
        ({"max_total_s": -0.5}, "max_total_s must be a number >= 0; got -0.5"),
        ({"backoff": 0.1}, "backoff must be a Backoff; got 0.1"),
    ],
)
def test_a_retry_option_out_of_range_is_refused_by_name(options, message) -> None:
    with pytest.raises(ValueError) as caught:
        RetryPolicy(**options)
    assert str(caught.value) == message


def test_a_retry_policy_takes_each_option_at_its_lowest() -> None:
    policy = RetryPolicy(max_attempts=1, max_total_s=0)
    assert (policy.max_attempts, policy.max_total_s) == (1, 0)
    assert policy.next_delay(ConnectError("refused", sent=False), 1, 0.0) is None

"""The retry loop's wait for a server that is warming up, on its own, on a fake clock.

A 503 ``the policy is loading`` with ``Retry-After`` is asked again as often as the server
says (the backoff when longer, never more than its `max_s`), for up to `warm_up_s` from the
call's start and never past the caller's budget, apart from `max_attempts` and `max_total_s`,
which start afresh once the server answers otherwise. The server tests are in test_warm_up.py.
"""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace

import pytest

import vla_client.transports.retry as retry_module
from vla_client.errors import DeadlineExceededError, RequestTimeoutError, ServerError
from vla_client.protocol.status import POLICY_LOADING
from vla_client.transports import NO_RETRY, Backoff, RetryPolicy
from vla_client.transports.retry import aretrying, retrying, warming_up

BACKOFF = Backoff(initial_s=0.1, max_s=2.0, multiplier=2.0)


def loading(retry_after: float = 1.0, request_id: str | None = "r1") -> ServerError:
    return ServerError(503, POLICY_LOADING, retry_after=retry_after, request_id=request_id)


class FakeTime:
    """A clock that only the loop's sleeps move, in place of the retry module's `time`."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(retry_module, "time", SimpleNamespace(monotonic=fake.monotonic))
    return fake


class Script:
    """A call that raises the given errors in turn, then returns ``"served"``."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "served"


def test_a_warm_up_wait_honours_retry_after_and_is_capped() -> None:
    policy = RetryPolicy(backoff=BACKOFF)
    assert [policy.warm_up_delay(loading(1.0), n) for n in (1, 2, 3, 4, 5, 6)] == [
        1.0, 1.0, 1.0, 1.0, 1.6, 2.0,
    ]  # fmt: skip
    assert policy.warm_up_delay(loading(3600.0), 1) == 2.0  # asked again at the backoff's cap
    assert policy.warm_up_delay(loading(0.0), 2) == 0.2  # no sooner than the backoff


@pytest.mark.parametrize(
    ("error", "warm"),
    [
        (loading(), True),
        (ServerError(503, POLICY_LOADING), False),  # no Retry-After: not coming back
        (ServerError(503, "server busy", retry_after=1.0), False),  # the usual few retries
        (ServerError(503, "Scheduler worker exited; restart the server."), False),  # SGLang's
        (ServerError(500, POLICY_LOADING, retry_after=1.0), False),
        (RequestTimeoutError(POLICY_LOADING), False),
    ],
    ids=["loading", "no-retry-after", "busy", "sglang", "500", "timeout"],
)
def test_which_answers_are_a_warm_up(error: Exception, warm: bool) -> None:
    assert warming_up(error) is warm


def test_the_default_waits_a_minute() -> None:
    assert RetryPolicy().warm_up_s == 60.0 and NO_RETRY.warm_up_s == 0


@pytest.mark.parametrize("value", [-1.0, math.nan, -math.inf, "60"])
def test_warm_up_s_is_validated(value: float) -> None:
    with pytest.raises(ValueError, match=r"^warm_up_s must be a number >= 0; got "):
        RetryPolicy(warm_up_s=value)


def test_no_wait_raises_the_503_as_it_came(clock: FakeTime) -> None:
    for policy in (NO_RETRY, RetryPolicy(max_attempts=5, warm_up_s=0)):
        call = Script(loading())
        with pytest.raises(ServerError) as raised:
            retrying(call, policy, sleep=clock.sleep)
        assert raised.value.detail == POLICY_LOADING and call.calls == 1
    assert clock.sleeps == []


def test_a_warm_up_is_waited_out_past_max_attempts_and_max_total_s(clock: FakeTime) -> None:
    retried: list[Exception] = []
    policy = RetryPolicy(max_attempts=2, max_total_s=0.5, backoff=BACKOFF, warm_up_s=10.0)
    answers = [loading() for _ in range(4)]
    call = Script(*answers)
    assert retrying(call, policy, on_retry=retried.append, sleep=clock.sleep) == "served"
    assert clock.sleeps == [1.0] * 4 and call.calls == 5 and retried == answers


@pytest.mark.parametrize(("warm_up_s", "waits"), [(3.5, 3), (3.0, 3), (2.999, 2)])
def test_a_warm_up_longer_than_warm_up_s_is_a_timeout_naming_it(
    clock: FakeTime, warm_up_s: float, waits: int
) -> None:
    policy = RetryPolicy(backoff=BACKOFF, warm_up_s=warm_up_s)
    call = Script(*[loading() for _ in range(100)])
    with pytest.raises(RequestTimeoutError) as raised:
        retrying(call, policy, sleep=clock.sleep)
    assert type(raised.value) is RequestTimeoutError  # not the deadline's
    assert clock.sleeps == [1.0] * waits  # a wait that ends exactly at warm_up_s is taken
    assert str(raised.value) == (
        f"the server was still warming up after {waits:g} s (it answered 503: "
        f"{POLICY_LOADING}); wait longer with RetryPolicy(warm_up_s=...)"
    )
    assert raised.value.request_id == "r1" and isinstance(raised.value.__cause__, ServerError)


@pytest.mark.parametrize(("budget_s", "waits"), [(2.5, 2), (2.0, 2), (4.0, 4)])
def test_the_deadline_ends_the_wait_when_it_comes_first(
    clock: FakeTime, budget_s: float, waits: int
) -> None:
    """The deadline's when it is no later than warm_up_s (here 4 s)."""
    call = Script(*[loading() for _ in range(100)])
    policy = RetryPolicy(backoff=BACKOFF, warm_up_s=4.0)
    with pytest.raises(DeadlineExceededError) as raised:
        retrying(call, policy, budget_s=budget_s, sleep=clock.sleep)
    assert clock.sleeps == [1.0] * waits
    assert str(raised.value).startswith(f"the server was still warming up after {waits:g} s")
    assert str(raised.value).endswith("; give the request a longer deadline_s")
    assert raised.value.request_id == "r1"


def test_a_deadline_later_than_warm_up_s_leaves_it_to_warm_up_s(clock: FakeTime) -> None:
    call = Script(*[loading() for _ in range(100)])
    policy = RetryPolicy(backoff=BACKOFF, warm_up_s=2.5)
    with pytest.raises(RequestTimeoutError) as raised:
        retrying(call, policy, budget_s=2.6, sleep=clock.sleep)
    assert type(raised.value) is RequestTimeoutError and clock.sleeps == [1.0, 1.0]


def test_the_retry_policy_starts_afresh_once_the_server_is_warm(clock: FakeTime) -> None:
    """Its attempts and its time: two busy answers after a 4 s warm-up are each retried."""
    policy = RetryPolicy(max_attempts=3, max_total_s=0.5, backoff=BACKOFF)
    busy = ServerError(503, "server busy", retry_after=0.25)
    call = Script(*[loading() for _ in range(4)], busy, busy)
    assert retrying(call, policy, sleep=clock.sleep) == "served"
    assert clock.sleeps == [1.0] * 4 + [0.25, 0.25]
    too_busy = Script(loading(), busy, busy, busy)
    with pytest.raises(ServerError, match="server busy"):
        retrying(too_busy, policy, sleep=clock.sleep)
    assert too_busy.calls == 4  # the warm-up answer, then max_attempts


def test_the_warm_up_backoff_starts_again_after_another_answer(clock: FakeTime) -> None:
    policy = RetryPolicy(max_attempts=5, backoff=BACKOFF)
    busy = ServerError(503, "server busy", retry_after=0.0)
    call = Script(loading(0.0), loading(0.0), busy, loading(0.0))
    assert retrying(call, policy, sleep=clock.sleep) == "served"
    assert clock.sleeps == pytest.approx([0.1, 0.2, 0.0, 0.1])


def test_an_attempt_that_runs_out_of_time_after_a_warm_up_answer_says_so(
    clock: FakeTime,
) -> None:
    late = DeadlineExceededError("no reply to r1 within its deadline of 3 s", request_id="r1")
    call = Script(loading(), loading(), late)
    with pytest.raises(DeadlineExceededError) as raised:
        retrying(call, RetryPolicy(backoff=BACKOFF), budget_s=3.0, sleep=clock.sleep)
    assert str(raised.value) == (
        "no reply to r1 within its deadline of 3 s: the server's last answer, 1 s into the "
        f"call, was that it was still warming up (503: {POLICY_LOADING}); give the request a "
        "longer deadline_s"
    )
    assert raised.value.request_id == "r1" and raised.value.__cause__ is late


def test_a_deadline_after_other_answers_is_raised_as_it_came(clock: FakeTime) -> None:
    late = DeadlineExceededError("no reply to r1 within its deadline of 3 s")
    busy = ServerError(503, "server busy", retry_after=0.1)
    for answers in [(late,), (loading(), busy, late)]:
        with pytest.raises(DeadlineExceededError) as raised:
            retrying(
                Script(*answers), RetryPolicy(backoff=BACKOFF), budget_s=3.0, sleep=clock.sleep
            )
        assert raised.value is late


def test_aretrying_waits_for_warm_up_as_retrying_does() -> None:
    policy = RetryPolicy(max_attempts=1, backoff=Backoff(initial_s=0.001, max_s=0.002))
    call = Script(*[loading(0.0) for _ in range(4)])

    async def attempt() -> str:
        return call()

    assert asyncio.run(aretrying(attempt, policy)) == "served" and call.calls == 5

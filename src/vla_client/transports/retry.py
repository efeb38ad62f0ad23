"""Bounded retries for every transport, and the backoff schedule websocket reconnects share.

Only two failures are retried, because only they are known not to have run the policy on a
stale observation or to be worth waiting for: a connection that never opened (refused, DNS,
connect timeout: `ConnectError` with ``sent=False``), and a 503 that says when to come back
(``Retry-After``). A read timeout, a dropped connection, a 500 or a 4xx is raised at once: the
policy may have run, or the same request would fail again. Retries stop after
`max_attempts` attempts or when the next wait would pass `max_total_s` (or the caller's
budget, such as a request's deadline), whichever comes first.

A server still warming up is waited for longer: the reference server answers 503
``the policy is loading`` with ``Retry-After`` until its policy has loaded and warmed up,
before any work on the request. Those answers are tried again for up to `warm_up_s` (and never
past the caller's budget), apart from `max_attempts` and `max_total_s`, which count from the
first answer of a warm server; a warm-up that outlasts them is a `RequestTimeoutError` (a
`DeadlineExceededError` when the deadline ended the wait) that says so. SGLang's action server
needs none of this: it holds every request until its warm-up is over, so the wait there is
the read timeout's and the deadline's; its 503 ``{"error": ...}`` means its scheduler died
("restart the server") and is raised at once.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeGuard, TypeVar

from vla_client.errors import (
    ConnectError,
    DeadlineExceededError,
    RequestTimeoutError,
    ServerError,
    TransportError,
)
from vla_client.protocol.status import POLICY_LOADING
from vla_client.transports.drive import Sleep, Steps, adrive, called, drive
from vla_client.validation import check_at_least

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Exponential delays: `initial_s`, then times `multiplier` per failure, capped at `max_s`."""

    initial_s: float = 0.05
    max_s: float = 2.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        check_at_least("initial_s", self.initial_s, 0)
        check_at_least("max_s", self.max_s, 0)
        check_at_least("multiplier", self.multiplier, 1)

    def delay(self, failures: int) -> float:
        """Seconds to wait after `failures` (>= 1) consecutive failures."""
        return float(min(self.max_s, self.initial_s * self.multiplier ** max(0, failures - 1)))


@dataclass(frozen=True)
class RetryPolicy:
    """How many times, and for how long, a request may be tried.

    `warm_up_s` is the longest wait for a server that answers it is still warming up (503
    ``the policy is loading`` with ``Retry-After``), counted from the call's start; a
    request's deadline ends the wait sooner. With 0 there is no wait: the 503 is raised as it
    came, a `ServerError`.
    """

    max_attempts: int = 3
    max_total_s: float = 5.0
    backoff: Backoff = field(default_factory=Backoff)
    warm_up_s: float = 60.0

    def __post_init__(self) -> None:
        check_at_least("max_attempts", self.max_attempts, 1, integer=True)
        check_at_least("max_total_s", self.max_total_s, 0)
        check_at_least("warm_up_s", self.warm_up_s, 0)
        if not isinstance(self.backoff, Backoff):
            raise ValueError(f"backoff must be a Backoff; got {self.backoff!r}")

    def next_delay(self, error: Exception, attempts: int, elapsed_s: float) -> float | None:
        """Seconds to wait before attempt ``attempts + 1``, or None to give up and raise."""
        if attempts >= self.max_attempts:
            return None
        if isinstance(error, ConnectError) and not error.sent:
            delay = max(self.backoff.delay(attempts), error.retry_after or 0.0)
        elif isinstance(error, ServerError) and error.retryable and error.retry_after is not None:
            delay = error.retry_after
        else:
            return None
        return delay if elapsed_s + delay <= self.max_total_s else None

    def warm_up_delay(self, error: ServerError, failures: int) -> float:
        """Seconds to wait after the `failures`-th warm-up answer in a row: the server's
        ``Retry-After`` or the backoff, whichever is longer, at most the backoff's `max_s`."""
        return min(max(self.backoff.delay(failures), error.retry_after or 0.0), self.backoff.max_s)


NO_RETRY = RetryPolicy(max_attempts=1, warm_up_s=0)


def warming_up(error: Exception) -> TypeGuard[ServerError]:
    """Whether `error` is a server's answer that it is still warming up (and will take the
    request, unrun, once it is warm)."""
    return isinstance(error, ServerError) and error.retryable and error.detail == POLICY_LOADING


def retried(
    attempt: Callable[[], Steps[T]],
    policy: RetryPolicy,
    *,
    budget_s: float | None = None,
    on_retry: Callable[[Exception], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Steps[T]:
    """The steps of `attempt()`, a fresh set per try, retried as `policy` allows within
    `budget_s` seconds; each wait a `Sleep` step (`sleep` when driven blocking)."""
    attempts = _Attempts(policy, budget_s, on_retry)
    while True:
        try:
            return (yield from attempt())
        except (TransportError, ServerError) as error:
            yield Sleep(attempts.wait_after(error), sleep)


def retrying(
    call: Callable[[], T],
    policy: RetryPolicy,
    *,
    budget_s: float | None = None,
    on_retry: Callable[[Exception], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`call()`, retried as `policy` allows within `budget_s` seconds."""
    steps = retried(
        partial(called, call), policy, budget_s=budget_s, on_retry=on_retry, sleep=sleep
    )
    result: T = drive(steps)
    return result


async def aretrying(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    budget_s: float | None = None,
    on_retry: Callable[[Exception], None] | None = None,
) -> T:
    """`retrying` for coroutines; waits with `asyncio.sleep`."""
    steps = retried(partial(called, call), policy, budget_s=budget_s, on_retry=on_retry)
    result: T = await adrive(steps)
    return result


class _Attempts:
    """The count, clock and budget of one retried call (`retried`)."""

    def __init__(
        self,
        policy: RetryPolicy,
        budget_s: float | None,
        on_retry: Callable[[Exception], None] | None,
    ) -> None:
        self.policy = policy
        self.budget_s = budget_s
        self.on_retry = on_retry
        self.count = 1
        self.called = self.start = time.monotonic()
        """When the call began (the warm-up wait's clock), and when the retry policy's clock
        began: the call's start, or the end of the last wait for warm-up."""
        self.warm_ups = 0
        self.warming: tuple[ServerError, float] | None = None
        """The last answer that the server was warming up, and when it came, until another."""

    def wait_after(self, error: Exception) -> float:
        """Seconds to wait before the next attempt; re-raises `error` when there is none."""
        now = time.monotonic()
        if warming_up(error):
            return self._wait_for_warm_up(error, now)
        if isinstance(error, DeadlineExceededError) and self.warming is not None:
            answer, at = self.warming  # the attempt after a wait for warm-up ran out of time
            raise DeadlineExceededError(
                f"{error}: the server's last answer, {at - self.called:.3g} s into the call, "
                f"was that it was still warming up ({answer.status_code}: {answer.detail}); "
                "give the request a longer deadline_s",
                request_id=error.request_id,
            ) from error
        self.warm_ups, self.warming = 0, None
        delay = self.policy.next_delay(error, self.count, now - self.start)
        if delay is None or self._past_budget(now, delay):
            raise error
        self.count += 1
        return self._retried(error, delay)

    def _wait_for_warm_up(self, error: ServerError, now: float) -> float:
        """The wait before asking a warming-up server again; raises the timeout that names
        the warm-up once the wait would pass `warm_up_s` or the budget. The retry policy's
        attempts and time start afresh after it."""
        if self.policy.warm_up_s == 0:
            raise error
        self.warm_ups += 1
        delay = self.policy.warm_up_delay(error, self.warm_ups)
        waited = now - self.called
        deadline_first = self.budget_s is not None and self.budget_s <= self.policy.warm_up_s
        if deadline_first and self._past_budget(now, delay):
            raise DeadlineExceededError(
                _still_warming(error, waited, "give the request a longer deadline_s"),
                request_id=error.request_id,
            ) from error
        if waited + delay > self.policy.warm_up_s:
            raise RequestTimeoutError(
                _still_warming(error, waited, "wait longer with RetryPolicy(warm_up_s=...)"),
                request_id=error.request_id,
            ) from error
        self.count, self.start, self.warming = 1, now + delay, (error, now)
        return self._retried(error, delay)

    def _past_budget(self, now: float, delay: float) -> bool:
        return self.budget_s is not None and now - self.called + delay > self.budget_s

    def _retried(self, error: Exception, delay: float) -> float:
        if self.on_retry is not None:
            self.on_retry(error)
        return delay


def _still_warming(error: ServerError, waited: float, fix: str) -> str:
    return (
        f"the server was still warming up after {waited:.3g} s (it answered "
        f"{error.status_code}: {error.detail}); {fix}"
    )

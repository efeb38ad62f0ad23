"""Bounded retries for every transport, and the backoff schedule websocket reconnects share.

Only two failures are retried, because only they are known not to have run the policy on a
stale observation or to be worth waiting for: a connection that never opened (refused, DNS,
connect timeout: `ConnectError` with ``sent=False``), and a 503 that says when to come back
(``Retry-After``). A read timeout, a dropped connection, a 500 or a 4xx is raised at once: the
policy may have run, or the same request would fail again. Retries stop after
`max_attempts` attempts or when the next wait would pass `max_total_s` (or the caller's
budget, such as a request's deadline), whichever comes first.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from vla_client.errors import ConnectError, ServerError, TransportError
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
    """How many times, and for how long, a request may be tried."""

    max_attempts: int = 3
    max_total_s: float = 5.0
    backoff: Backoff = field(default_factory=Backoff)

    def __post_init__(self) -> None:
        check_at_least("max_attempts", self.max_attempts, 1, integer=True)
        check_at_least("max_total_s", self.max_total_s, 0)
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


NO_RETRY = RetryPolicy(max_attempts=1)


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
        self.start = time.monotonic()

    def wait_after(self, error: Exception) -> float:
        """Seconds to wait before the next attempt; re-raises `error` when there is none."""
        elapsed = time.monotonic() - self.start
        delay = self.policy.next_delay(error, self.count, elapsed)
        if delay is None or (self.budget_s is not None and elapsed + delay > self.budget_s):
            raise error
        if self.on_retry is not None:
            self.on_retry(error)
        self.count += 1
        return delay

"""Fakes for the control tests: a manual clock and a scripted policy with controllable replies."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from vla_client.client.result import ActionResult, Timings
from vla_client.observation import Observation


class ManualClock:
    """A clock that only moves when told to, so deadlines and ages are exact."""

    def __init__(self, start: float = 100.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakePolicy:
    """An `infer` callable whose chunk row i is ``[i, n]`` for the n-th request (1-based).

    Replies carry request id ``req-n``. `gated` makes each call wait for `release()`; `infer_s`
    is time that passes during the call (on a ManualClock it is advanced, otherwise slept);
    `reply_id` maps n to the id the reply carries instead; `error` is raised instead of replying.
    """

    def __init__(
        self,
        *,
        horizon: int = 10,
        action_dim: int = 2,
        gated: bool = False,
        infer_s: float = 0.0,
        clock: ManualClock | None = None,
        reply_id: Callable[[int], str] | None = None,
        error: Exception | None = None,
        server_ms: float | None = None,
    ) -> None:
        self.horizon = horizon
        self.action_dim = action_dim
        self.gated = gated
        self.infer_s = infer_s
        self.clock = clock
        self.reply_id = reply_id
        self.error = error
        self.server_ms = server_ms
        self.requests: list[str] = []
        self.observations: list[Observation] = []
        self._gate = threading.Semaphore(0)

    def release(self) -> None:
        self._gate.release()

    def __call__(self, observation: Observation) -> ActionResult:
        number = len(self.requests) + 1
        request_id = f"req-{number}" if self.reply_id is None else self.reply_id(number)
        self.requests.append(request_id)
        self.observations.append(observation)
        if self.gated and not self._gate.acquire(timeout=5):
            raise AssertionError("FakePolicy was never released")
        if self.clock is not None:
            self.clock.advance(self.infer_s)
        elif self.infer_s:
            time.sleep(self.infer_s)
        if self.error is not None:
            raise self.error
        actions = np.zeros((self.horizon, self.action_dim), dtype=np.float32)
        actions[:, 0] = np.arange(self.horizon)
        actions[:, 1] = number
        server = {} if self.server_ms is None else {"total_ms": self.server_ms}
        timings = Timings(1.0, self.infer_s * 1e3, 1.0, 100, 100, server=server)
        return ActionResult(actions, request_id, timings, raw={})


def make_observation(capture_time: float | None = None) -> Observation:
    frames = {"wrist": np.zeros((4, 4, 3), dtype=np.uint8)}
    times = None if capture_time is None else {"wrist": capture_time}
    return Observation(frames, state=[0.0, 0.0], capture_times=times)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def policy_type() -> type[FakePolicy]:
    return FakePolicy


@pytest.fixture
def observe(clock: ManualClock) -> Callable[[], Observation]:
    """Observations captured now, on the manual clock."""
    return lambda: make_observation(clock())


@pytest.fixture
def observe_aged(clock: ManualClock) -> Callable[[float], Callable[[], Observation]]:
    """Observations whose frames were captured `age` seconds before now."""
    return lambda age: lambda: make_observation(clock() - age)


@pytest.fixture
def observe_untimed() -> Callable[[], Observation]:
    """Observations without capture times."""
    return make_observation

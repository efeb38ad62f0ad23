"""A request the server refuses (a 4xx) is retried on the next tick; only `max_refusals` of them
in a row end the executor, with the last reason. Before, one 400 ended the loop.

A fake `infer` here; the same against real servers, with a `ControlLoop` and its watchdog, is in
test_control_against_broken_servers.py.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from vla_client.client.result import ActionResult, Timings
from vla_client.control import ChunkExecutor
from vla_client.control.names import MAX_REFUSALS
from vla_client.errors import (
    ConnectError,
    ProtocolError,
    RefusalsError,
    ServerError,
    ServerErrorFrame,
    UnsafeActionError,
)
from vla_client.observation import Observation

CHUNK = np.zeros((2, 1), np.float32)


def scripted(*outcomes: Exception | None) -> Callable[[Observation], ActionResult]:
    """An `infer` raising `outcomes` in turn (None: a 2-row chunk), then replying."""
    calls: list[int] = []

    def infer(observation: Observation) -> ActionResult:
        calls.append(1)
        if len(calls) <= len(outcomes) and (outcome := outcomes[len(calls) - 1]) is not None:
            raise outcome
        return ActionResult(CHUNK, f"req-{len(calls)}", Timings(1.0, 1.0, 1.0, 1, 1), raw={})

    return infer


def run(executor: ChunkExecutor, observe: Callable[[], Observation], ticks: int) -> None:
    """`ticks` ticks, each reply in before the next."""
    for _ in range(ticks):
        executor.tick(observe)
        assert executor.join(5)


def test_one_refusal_is_counted_and_asked_again(clock, observe) -> None:
    refusal = ServerError(400, "parameters.rtc: bad")
    executor = ChunkExecutor(scripted(refusal), clock=clock, monotonic=clock)
    run(executor, observe, 3)
    assert executor.stats.refused == 1 and executor.stats.errors == 0
    assert executor.stats.requests_sent == 2 and executor.stats.chunks_received == 1
    assert executor.last_error is refusal


def test_the_default_run_of_refusals_ends_it_with_the_reason(clock, observe) -> None:
    refusals = [ServerError(400, f"bad {n}", request_id=f"r{n}") for n in range(MAX_REFUSALS)]
    executor = ChunkExecutor(scripted(*refusals), clock=clock, monotonic=clock)
    run(executor, observe, MAX_REFUSALS)  # the last refusal is collected by the next tick
    with pytest.raises(RefusalsError) as caught:
        executor.tick(observe)
    error = caught.value
    assert MAX_REFUSALS == 3
    assert str(error) == (
        "the server refused 3 requests in a row; the last: server answered 400: bad 2"
    )
    assert isinstance(error, ServerError) and error.__cause__ is refusals[-1]
    assert (error.status_code, error.detail, error.request_id) == (400, "bad 2", "r2")
    assert error.refusals == 3 and executor.stats.refused == 3


@pytest.mark.parametrize("max_refusals", [1, 5])
def test_max_refusals_in_a_row_end_it(max_refusals: int, clock, observe) -> None:
    refusals = [ServerError(422, "no") for _ in range(max_refusals)]
    executor = ChunkExecutor(
        scripted(*refusals), clock=clock, monotonic=clock, max_refusals=max_refusals
    )
    run(executor, observe, max_refusals)
    with pytest.raises(RefusalsError, match=f"refused {max_refusals} requests in a row"):
        executor.tick(observe)


@pytest.mark.parametrize(
    "between", [None, ProtocolError("ragged"), ConnectError("down")],
    ids=["a reply", "a malformed reply", "no answer"],
)  # fmt: skip
def test_any_other_outcome_ends_a_run_of_refusals(between: Exception | None, clock, observe):
    """Two refusals, another outcome, two more: never three in a row."""
    no = ServerError(400, "no")
    executor = ChunkExecutor(scripted(no, no, between, no, no), clock=clock, monotonic=clock)
    run(executor, observe, 12)
    assert executor.stats.refused == 4 and executor.stats.chunks_received >= 1


def test_an_error_frame_with_a_4xx_is_a_refusal(clock, observe) -> None:
    frame = ServerErrorFrame(400, "bad observation", code="invalid")
    executor = ChunkExecutor(scripted(frame), clock=clock, monotonic=clock)
    run(executor, observe, 3)
    assert executor.stats.refused == 1 and executor.stats.chunks_received == 1


def test_what_the_caller_got_wrong_still_ends_it_at_once(clock, observe) -> None:
    """`validate` refusing a chunk, or a bug in `infer`, is not the server refusing."""

    def refuse(chunk: np.ndarray) -> None:
        raise UnsafeActionError("out of bounds")

    executor = ChunkExecutor(scripted(), clock=clock, monotonic=clock, validate=refuse)
    run(executor, observe, 1)
    with pytest.raises(UnsafeActionError):
        executor.tick(observe)
    executor = ChunkExecutor(scripted(KeyError("typo")), clock=clock, monotonic=clock)
    run(executor, observe, 1)
    with pytest.raises(KeyError):
        executor.tick(observe)


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "3", None])
def test_max_refusals_is_checked(value: object) -> None:
    with pytest.raises(ValueError) as caught:
        ChunkExecutor(scripted(), max_refusals=value)  # type: ignore[arg-type]
    assert str(caught.value) == f"max_refusals must be an integer >= 1; got {value!r}"

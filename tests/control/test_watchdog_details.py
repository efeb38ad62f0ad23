"""Watchdog details the behaviour tests leave open: defaults, counts, messages, log lines."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from vla_client.control import ServerSilentError, Watchdog


def test_a_new_watchdog_holds_by_default_and_is_not_tripped(clock) -> None:
    watchdog = Watchdog(0.5, clock=clock)
    assert watchdog.behaviour == "hold"
    assert watchdog.tripped is False and watchdog.trips == 0
    assert float(watchdog.filter(np.float32([1.0]), last_chunk_at=clock())[0]) == 1.0
    clock.advance(0.75)
    assert float(watchdog.filter(np.float32([2.0]), last_chunk_at=100.0)[0]) == 1.0  # held
    assert watchdog.tripped is True


def test_the_timeout_must_be_positive_and_says_so() -> None:
    for timeout_s in (0.0, -1.0):
        with pytest.raises(
            ValueError, match=rf"^timeout_s must be a finite number > 0; got {timeout_s}$"
        ):
            Watchdog(timeout_s)


def test_the_stop_action_is_float32(clock) -> None:
    watchdog = Watchdog(0.25, "stop", stop_action=[0.5, -1.5], clock=clock)
    watchdog.filter(None, last_chunk_at=clock())
    clock.advance(0.5)
    stop = watchdog.filter(np.float32([9.0, 9.0]), last_chunk_at=100.0)
    assert stop.dtype == np.float32 and stop.tolist() == [0.5, -1.5]


def test_stop_without_a_stop_action_says_how_long_it_was_silent(clock) -> None:
    watchdog = Watchdog(0.25, "stop", clock=clock)
    watchdog.filter(None, last_chunk_at=clock())
    clock.advance(0.625)
    with pytest.raises(ServerSilentError, match=r"^no action chunk for 0\.625 s$"):
        watchdog.filter(None, last_chunk_at=100.0)


def test_every_trip_is_counted_and_logged_once_and_so_is_every_recovery(clock, caplog) -> None:
    caplog.set_level(logging.INFO, logger="vla_client.control.watchdog")
    watchdog = Watchdog(0.25, "finish_chunk", clock=clock)
    for trip in (1, 2):
        chunk_at = clock()
        watchdog.filter(np.float32([1.0]), last_chunk_at=chunk_at)
        clock.advance(0.5)
        watchdog.filter(None, last_chunk_at=chunk_at)
        watchdog.filter(None, last_chunk_at=chunk_at)  # still silent: no second count
        assert watchdog.tripped is True and watchdog.trips == trip
        watchdog.filter(np.float32([1.0]), last_chunk_at=clock())  # a chunk: back
        assert watchdog.tripped is False
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "server silent for 0.500 s: finish_chunk",
        "server back after 1 watchdog trip(s)",
        "server silent for 0.500 s: finish_chunk",
        "server back after 2 watchdog trip(s)",
    ]
    assert [record.levelno for record in caplog.records] == [logging.WARNING, logging.INFO] * 2


def test_a_stop_action_must_be_finite() -> None:
    for bad in ([0.0, float("nan")], [float("inf")]):
        with pytest.raises(ValueError) as caught:
            Watchdog(0.5, "stop", stop_action=bad)
        assert str(caught.value) == "stop_action must be finite"

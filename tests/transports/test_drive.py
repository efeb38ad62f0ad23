"""The two drivers of code written as steps (`vla_client.transports.drive`) agree on what each
kind of step gives back, and `adrive` keeps the event loop running: a `Sleep` is awaited, never
slept through with its blocking `sleep`, and `Offload` work runs in a worker thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from vla_client.transports.drive import Offload, Sleep, Steps, adrive, called, drive


def test_a_sleep_gives_nothing_back_under_either_driver_and_adrive_awaits_it() -> None:
    slept: list[float] = []

    def steps() -> Steps[Any]:
        got = yield Sleep(0.05, slept.append)
        return got

    assert drive(steps()) is None
    assert slept == [0.05]  # blocking: the step's own `sleep`

    async def alongside() -> tuple[Any, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0)  # the ticker starts
        before = ticks
        got = await adrive(steps())
        ticker.cancel()
        return got, ticks - before

    got, ticks = asyncio.run(alongside())
    assert got is None
    assert slept == [0.05]  # not called again: the wait was `asyncio.sleep`
    assert ticks > 0  # the loop ran other tasks during the wait


def test_each_step_gives_back_its_result_or_raises_at_its_yield() -> None:
    loop_threads: list[int] = []

    async def awaited() -> str:
        return "awaited"

    def steps(asynchronous: bool) -> Steps[list[Any]]:
        got = [(yield lambda: "plain"), (yield awaited if asynchronous else lambda: "returned")]
        got.append((yield Offload(lambda: threading.get_ident())))
        try:
            yield lambda: 1 / 0
        except ZeroDivisionError as error:
            got.append(type(error).__name__)
        got.append((yield from called(lambda: "called")))
        return got

    blocking = drive(steps(asynchronous=False))
    assert blocking[:2] == ["plain", "returned"] and blocking[2] == threading.get_ident()
    assert blocking[3:] == ["ZeroDivisionError", "called"]

    async def run() -> list[Any]:
        loop_threads.append(threading.get_ident())
        return await adrive(steps(asynchronous=True))

    driven = asyncio.run(run())
    assert driven[:2] == ["plain", "awaited"] and driven[3:] == ["ZeroDivisionError", "called"]
    assert driven[2] != loop_threads[0]  # the offloaded work ran off the event loop's thread


def test_an_error_the_steps_do_not_catch_comes_out_of_the_driver() -> None:
    def steps() -> Steps[None]:
        yield lambda: {}["missing"]

    with pytest.raises(KeyError, match="missing"):
        drive(steps())
    with pytest.raises(KeyError, match="missing"):
        asyncio.run(adrive(steps()))

"""Run code written once as steps, blocking (`drive`) or under asyncio (`adrive`).

Code that talks to a server without doing the I/O itself is written as a generator that yields
each I/O step as a function of no arguments and receives its result (the sans-IO shape of h11
and wsproto): a blocking driver calls the step, an asyncio driver calls it and awaits what it
returns. A step that raised is thrown back into the generator at its ``yield``, so the
generator's own ``try``/``except``/``finally`` handle failures (a socket to close, a timeout to
name); what it does not catch comes out of the driver. Two steps are told apart: work that
holds the CPU (fitting and encoding frames) is yielded as `Offload`, which `adrive` runs in a
worker thread, off the event loop; a pause (a retry's backoff) as `Sleep`, which `adrive`
awaits with `asyncio.sleep` so the loop keeps running.

The clients' calls (`vla_client.client`) and the websocket and ZeroMQ transports are written
this way, once for both kinds of caller.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
Steps = Generator[Callable[[], Any], Any, T]
"""A generator of I/O steps that returns a `T`."""


@dataclass(frozen=True)
class Offload:
    """A step of CPU work: run in place by `drive`, in a worker thread by `adrive`."""

    work: Callable[[], Any]

    def __call__(self) -> Any:
        return self.work()


@dataclass(frozen=True)
class Sleep:
    """A pause of `seconds`: `sleep` (`time.sleep`) by `drive`, `asyncio.sleep` by `adrive`."""

    seconds: float
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    def __call__(self) -> None:
        self.sleep(self.seconds)


def called(step: Callable[[], Any]) -> Steps[Any]:
    """The steps of one call: `step` itself, its result (awaited, under `adrive`) returned."""
    return (yield step)


class _Run:
    """One run of `steps`: hands out each step in turn, and takes back its result or error."""

    def __init__(self, steps: Steps[Any]) -> None:
        self._steps = steps
        self._value: Any = None
        self._error: BaseException | None = None
        self.result: Any = None

    def next_step(self) -> Callable[[], Any] | None:
        """The next step, or None when the steps have returned (their value in `result`)."""
        try:
            if self._error is None:
                return self._steps.send(self._value)
            return self._steps.throw(self._error)
        except StopIteration as done:
            self.result = done.value
            return None

    def took(self, value: Any = None, error: BaseException | None = None) -> None:
        """The step's result, or the error it raised (thrown into the steps next)."""
        self._value, self._error = value, error


def drive(steps: Steps[T]) -> T:
    """Run `steps`, each step called in turn; their result."""
    run = _Run(steps)
    while (step := run.next_step()) is not None:
        try:
            run.took(step())
        except BaseException as exc:  # the generator decides; it re-raises what it cannot use
            run.took(error=exc)
    return run.result  # type: ignore[no-any-return]


async def adrive(steps: Steps[T]) -> T:
    """Run `steps` under asyncio: each step called and, when it returns an awaitable, awaited;
    `Offload` steps in a worker thread, `Sleep` steps with `asyncio.sleep`."""
    run = _Run(steps)
    while (step := run.next_step()) is not None:
        try:
            if isinstance(step, Offload):
                value = await asyncio.to_thread(step.work)
            elif isinstance(step, Sleep):
                value = None
                await asyncio.sleep(step.seconds)
            else:
                value = step()
                if inspect.isawaitable(value):
                    value = await value
            run.took(value)
        except BaseException as exc:  # cancellation too: the generator closes what it holds
            run.took(error=exc)
    return run.result  # type: ignore[no-any-return]

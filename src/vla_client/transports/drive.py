"""Run code written once as steps, blocking (`drive`) or under asyncio (`adrive`).

Code that talks to a server without doing the I/O itself is written as a generator that yields
each I/O step as a function of no arguments and receives its result (the sans-IO shape of h11
and wsproto): a blocking driver calls the step, an asyncio driver calls it and awaits what it
returns. A step that raised is thrown back into the generator at its ``yield``, so the
generator's own ``try``/``except``/``finally`` handle failures (a socket to close, a timeout to
name); what it does not catch comes out of the driver. Work that holds the CPU (fitting and
encoding frames) is yielded as `Offload`, which `adrive` runs in a worker thread, off the
event loop.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Generator
from dataclasses import dataclass
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


def drive(steps: Steps[T]) -> T:
    """Run `steps`, each step called in turn; their result."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            value, error = step(), None
        except BaseException as exc:  # the generator decides; it re-raises what it cannot use
            value, error = None, exc


async def adrive(steps: Steps[T]) -> T:
    """Run `steps` under asyncio: each step called and, when it returns an awaitable, awaited;
    `Offload` steps in a worker thread."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            if isinstance(step, Offload):
                value = await asyncio.to_thread(step.work)
            else:
                value = step()
                if inspect.isawaitable(value):
                    value = await value
            error = None
        except BaseException as exc:  # cancellation too: the generator closes what it holds
            value, error = None, exc

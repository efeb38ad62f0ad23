"""The batcher: requests from several robots wait here and leave as one policy call.

Dynamic batching in the usual serving-engine sense: while the worker runs one batch, new
requests pile up, and the next batch takes up to `max_batch` of them at once. `wait_s` lets a
batch wait a little for company once the worker is free (0 sends what is queued at once, so a
lone robot never pays for batching). It is event driven, not a polling task: a request that
finds the worker idle is sent from the call that queued it, which keeps the hand-off short. The
queue has no bound of its own: the runner admits a request only when it can give it a
shared-memory slot, and the slot pool is the bound.

An entrypoint linked to a worker that other entrypoints share (``serve --api-servers N``) does
not hold requests back while its batch runs (``one_at_a_time=False``): it passes them on at
once, and the worker, which sees what every entrypoint sent, makes the batches. Held back at
each entrypoint, they reached the worker one entrypoint at a time after each batch, and the
next batch started with the first entrypoint's requests alone: with four entrypoints and a
fixed cost per forward pass, batches were smaller and throughput lower than with one.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass
class Pending(Generic[T]):
    """A request between admission and reply; `item` is what the worker needs."""

    item: T
    future: asyncio.Future[Any]
    on_retire: Callable[[], None]
    admitted: float = field(default_factory=time.perf_counter)
    dispatched: float = 0.0
    retired: bool = False

    def retire(self) -> None:
        """Give back what the request holds, exactly once."""
        if not self.retired:
            self.retired = True
            self.on_retire()

    def resolve(self, value: Any) -> None:
        self.retire()
        if not self.future.done():
            self.future.set_result(value)

    def fail(self, error: BaseException) -> None:
        self.retire()
        if not self.future.done():
            self.future.set_exception(error)


class Batcher(Generic[T]):
    """FIFO of `Pending` requests; calls `send` with a batch whenever it is not `paused`.

    With `one_at_a_time` (the default) it pauses itself after each batch it sends, and the
    owner calls `resume` when the worker can take the next one; without, it sends whatever
    waits as soon as it can, a batch of up to `max_batch` at a time. The owner also pauses it
    while the worker is down.
    """

    def __init__(
        self,
        max_batch: int,
        wait_s: float,
        send: Callable[[list[Pending[T]]], None],
        *,
        one_at_a_time: bool = True,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.max_batch = max_batch
        self.wait_s = wait_s
        self.one_at_a_time = one_at_a_time
        self.paused = True
        self._send = send
        self._waiting: deque[Pending[T]] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._waiting)

    def put(self, pending: Pending[T]) -> None:
        self._waiting.append(pending)
        self._kick()

    def resume(self) -> None:
        self.paused = False
        self._kick()

    def drain(self) -> list[Pending[T]]:
        """Remove and return everything still waiting."""
        self._cancel_timer()
        drained = list(self._waiting)
        self._waiting.clear()
        return drained

    def _kick(self) -> None:
        if self.paused or not self._live():
            return
        if self.wait_s > 0 and len(self._waiting) < self.max_batch:
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(self.wait_s, self._flush)
            return
        self._flush()

    def _flush(self) -> None:
        self._cancel_timer()
        while not self.paused:
            batch: list[Pending[T]] = []
            while self._waiting and len(batch) < self.max_batch:
                pending = self._waiting.popleft()
                if pending.future.done():  # the client went away while it waited
                    pending.retire()
                    continue
                batch.append(pending)
            if not batch:
                return
            self.paused = self.one_at_a_time
            self._send(batch)

    def _live(self) -> bool:
        while self._waiting and self._waiting[0].future.done():
            self._waiting.popleft().retire()
        return bool(self._waiting)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

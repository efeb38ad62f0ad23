"""`WorkerRunner`: the entrypoint's side of the worker layout (admission, batching, supervision).

A request is admitted only while fewer than `queue_size` requests are waiting or running,
otherwise it gets 503 with ``Retry-After`` at once. It runs in a shared-memory slot: the one the
entrypoint read its body into (`lend_memory`), where arrays decoded from the body already lie,
or a fresh one; arrays not yet in the slot are copied in. Then it joins the `Batcher`, which
sends batches to the worker one at a time; an entrypoint linked to a shared worker sends them
as they come, and the worker merges what every entrypoint sent into its batches
(`scheduler`). Replies are matched back to requests by job id.
When the worker dies, or runs past `inference_timeout_s` and is killed, the requests it held
get 503 and a new worker is started; the requests still queued wait for it. Nothing here ever
waits without a bound.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import socket
import time
from collections import Counter
from typing import Any

import numpy as np

from vla_client.errors import InferenceError, PolicyFailedError, PolicyInputError, WorkerStartError
from vla_client.protocol.status import POLICY_LOADING
from vla_client.server.config import WorkerSettings
from vla_client.server.engine.inference import RequestMemory
from vla_client.server.policy import Policy, PolicyInput
from vla_client.server.worker.messages import (
    RTC_PREFIX_KEY,
    STATE_KEY,
    Batch,
    BatchDone,
    BatchFailed,
    Job,
    Result,
)
from vla_client.server.worker.scheduler import Batcher, Pending
from vla_client.server.worker.shm import (
    AdoptedSlot,
    ArrayLayout,
    Lease,
    Segment,
    Slot,
    SlotPool,
    plan_layout,
    view,
    write_arrays,
)
from vla_client.server.worker.supervisor import WorkerLink, WorkerProcess
from vla_client.server.worker.threads import WorkerThreads, worker_threads
from vla_client.validation import check_at_least

log = logging.getLogger("vla_client.server.worker")

RETRY_AFTER_S = 1.0
_MAX_RESTART_DELAY_S = 5.0

Timings = dict[str, float]


class WorkerRunner:
    """Runs `policy` in a supervised worker process; arrays cross in shared memory.

    By default the runner starts a worker of its own. With `listener` (a listening Unix socket)
    that worker also serves the entrypoints that connect there; with `address` the runner starts
    no worker but connects to the one listening at `address`, and reconnects when it restarts.
    `entrypoints` is how many entrypoint processes share the worker it starts: the default
    torch thread count leaves them a core each (`vla_client.server.worker.threads`).
    """

    def __init__(
        self,
        policy: Policy,
        settings: WorkerSettings | None = None,
        *,
        listener: socket.socket | None = None,
        address: str | None = None,
        entrypoints: int = 1,
    ) -> None:
        if listener is not None and address is not None:
            raise ValueError("a runner either starts the worker (listener) or links to one")
        check_at_least("entrypoints", entrypoints, 1, integer=True)
        self.settings = settings or WorkerSettings()
        self._worker: WorkerProcess | WorkerLink
        if address is not None:
            self._worker = WorkerLink(address, on_message=self._on_message, on_exit=self._on_exit)
        else:
            self._worker = WorkerProcess(
                policy,
                max_batch=self.settings.max_batch,
                listener=listener,
                on_message=self._on_message,
                on_exit=self._on_exit,
                threads=worker_threads(self.settings.torch_threads, entrypoints, os.environ),
            )
        self._pool = SlotPool(self.settings.queue_size)
        self._batcher: Batcher[Job] = Batcher(
            self.settings.max_batch,
            self.settings.batch_wait_ms / 1000,
            self._send,
            one_at_a_time=not self.links,
        )
        self.batch_sizes: Counter[int] = Counter()
        """How many batches of each size it has sent the worker (for ``/metrics``)."""
        self._in_flight: dict[int, Pending[Job]] = {}
        # batch id -> its job ids and the timer that bounds it, for each batch at the worker
        self._batches: dict[int, tuple[tuple[int, ...], asyncio.TimerHandle]] = {}
        self._admitted = 0
        self._batch_ids = itertools.count(1)
        self._job_ids = itertools.count()
        self._started = False
        self._restarter: asyncio.Task[None] | None = None
        self._timed_out = False
        self._start_error = ""
        self._closing = False

    @property
    def decodes_jpeg(self) -> bool:
        """Whether the worker's policy takes JPEG frames encoded (`Policy.decodes_jpeg`)."""
        return self._started and self._worker.decodes_jpeg

    @property
    def links(self) -> bool:
        """Whether this runner links to a worker another process started (an entrypoint of
        ``--api-servers``): its start is a connect, not a policy load."""
        return isinstance(self._worker, WorkerLink)

    @property
    def threads(self) -> WorkerThreads | None:
        """The OpenMP settings of the worker this runner starts (None when it links to one)."""
        return self._worker.threads if isinstance(self._worker, WorkerProcess) else None

    @property
    def slots_in_use(self) -> int:
        """Shared-memory slots held by requests now: 0 whenever the server is idle."""
        return self._pool.in_use

    @property
    def shm_bytes(self) -> int:
        """Bytes of shared memory its slots hold now, idle ones included."""
        return self._pool.reserved_bytes

    @property
    def worker_pid(self) -> int | None:
        """The current worker's process id (tests use it to simulate a crash)."""
        return self._worker.pid

    async def start(self) -> None:
        """Spawn the worker and wait for its policy to load. Raises `WorkerStartError`.

        Once started, calling it again does nothing.
        """
        if self._started:
            return
        await self._worker.start()
        self._started = True
        self._batcher.resume()

    def lend_memory(self) -> Lease:
        """A shared-memory slot to read a request body into; pass it to `infer`, then release."""
        return self._pool.lend()

    def adopt(self, segment: Segment) -> AdoptedSlot:
        """A slot for a client's segment (``ipc://``), whose frames the worker reads in place;
        `let_go` it when the client is done with it."""
        return self._pool.adopt(segment)

    def lend_adopted(self, slot: AdoptedSlot, used: int) -> Lease:
        """The memory of one request whose frames fill `slot`'s first `used` bytes: pass it to
        `infer`, then release."""
        return self._pool.lend_adopted(slot, used)

    def let_go(self, slot: AdoptedSlot) -> None:
        """Unmap a client's segment here and, at the next batch, in the worker."""
        self._pool.let_go(slot)

    async def infer(
        self, observation: PolicyInput, memory: RequestMemory | None = None
    ) -> tuple[np.ndarray, Timings]:
        start = time.perf_counter()
        if self._closing:
            raise InferenceError(503, "the server is shutting down", retry_after=RETRY_AFTER_S)
        if not self._started:
            raise InferenceError(503, POLICY_LOADING, retry_after=RETRY_AFTER_S)
        if self._start_error:
            raise InferenceError(503, self._start_error, retry_after=RETRY_AFTER_S)
        if self._admitted >= self.settings.queue_size:
            raise InferenceError(
                503,
                f"server busy: {self.settings.queue_size} requests already queued or running",
                retry_after=RETRY_AFTER_S,
            )
        if isinstance(memory, Lease):
            lease = memory
            lease.hold()
        else:
            lease = self._pool.lend()
        try:
            job = self._write_job(lease.slot, observation)
        except BaseException:
            lease.release()
            raise
        self._admitted += 1
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[np.ndarray, Timings]] = loop.create_future()
        pending = Pending(job, future, on_retire=lambda: self._retire(lease))
        copy_ms = (pending.admitted - start) * 1000
        self._batcher.put(pending)
        actions, timings = await future
        waited_ms = (time.perf_counter() - pending.dispatched) * 1000
        at_worker_ms = timings["queue_ms"] - (pending.dispatched - pending.admitted) * 1000
        timings["ipc_ms"] = copy_ms + max(waited_ms - timings["inference_ms"] - at_worker_ms, 0.0)
        return actions, timings

    async def close(self) -> None:
        """Fail what is queued, let the running batch finish (bounded), stop the worker, unlink."""
        self._closing = True
        if self._restarter is not None:
            self._restarter.cancel()
        for pending in self._batcher.drain():
            pending.fail(InferenceError(503, "the server is shutting down"))
        deadline = time.perf_counter() + self.settings.inference_timeout_s
        while self._in_flight and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
        await self._worker.stop()
        self._fail_in_flight("the server shut down while this request was running")
        self._pool.close()

    def _retire(self, lease: Lease) -> None:
        self._admitted -= 1
        lease.release()

    def _write_job(self, slot: Slot, observation: PolicyInput) -> Job:
        """Place the observation's arrays in `slot`: in place where they already lie there."""
        arrays: dict[str, np.ndarray] = dict(observation.images)
        if observation.state is not None:
            arrays[STATE_KEY] = np.ascontiguousarray(observation.state)
        rtc = observation.rtc
        if rtc is not None:
            arrays[RTC_PREFIX_KEY] = np.ascontiguousarray(rtc.prefix_actions)
        in_place: list[ArrayLayout] = []
        to_copy: dict[str, np.ndarray] = {}
        for key, array in arrays.items():
            offset = slot.locate(array)
            if offset is None:
                to_copy[key] = array
            else:
                in_place.append(ArrayLayout(key, array.dtype.str, array.shape, offset))
        copies, end = plan_layout(to_copy, slot.used)
        if slot.fits(end):
            slot.reserve(end)  # a no-op that notes the need: the pool sizes idle slots by it
        else:
            # Growing replaces the segment the body is in: everything moves to the new one,
            # made big enough for body and copies together, so the next such request fits.
            moved, moved_end = plan_layout(arrays)
            slot.reserve(max(end, moved_end))
            in_place, to_copy, copies, end = [], arrays, moved, moved_end
        write_arrays(slot.buffer, to_copy, copies)
        return Job(
            job_id=next(self._job_ids),
            slot_index=slot.index,
            slot_name=slot.name,
            arrays=(*in_place, *copies),
            results_offset=end,
            task=observation.task,
            action_horizon=observation.action_horizon,
            num_inference_steps=observation.num_inference_steps,
            seed=observation.seed,
            rtc_delay=None if rtc is None else rtc.inference_delay_steps,
            rtc_horizon=None if rtc is None else rtc.execution_horizon,
        )

    def _send(self, batch: list[Pending[Job]]) -> None:
        self.batch_sizes[len(batch)] += 1
        now = time.perf_counter()
        for pending in batch:
            pending.dispatched = now
            self._in_flight[pending.item.job_id] = pending
        batch_id = next(self._batch_ids)
        try:
            forget = self._pool.take_forgotten()
            self._worker.send(Batch(batch_id, tuple(p.item for p in batch), forget))
        except OSError:  # the worker just died; its exit fails these requests
            return
        timer = asyncio.get_running_loop().call_later(
            self.settings.inference_timeout_s, self._on_timeout
        )
        self._batches[batch_id] = (tuple(p.item.job_id for p in batch), timer)

    def _on_message(self, message: Any) -> None:
        if isinstance(message, BatchDone):
            for result in message.results:
                pending = self._in_flight.pop(result.job_id, None)
                if pending is not None:
                    self._resolve(pending, result, message)
        elif isinstance(message, BatchFailed):  # logged per request, with the traceback
            job_ids, _ = self._batches.get(message.batch_id, ((), None))
            for job_id in job_ids:
                pending = self._in_flight.pop(job_id, None)
                if pending is not None:
                    pending.fail(
                        PolicyFailedError(message.error, policy_traceback=message.traceback)
                    )
        self._finish_batch(message.batch_id)

    def _resolve(self, pending: Pending[Job], result: Result, done: BatchDone) -> None:
        layout = result.layout
        if layout is None and result.refused:  # the policy cannot read the observation
            pending.fail(PolicyInputError(result.error or "the policy cannot read the observation"))
            return
        if layout is None:  # the chunk failed its check; the detail is the server's own words
            log.warning("policy output refused (job %d): %s", result.job_id, result.error)
            pending.fail(InferenceError(500, result.error or "policy returned no actions"))
            return
        if result.inline is None:
            try:
                slot = self._pool.slot(pending.item.slot_index)
            except KeyError:  # a client's segment let go after its request timed out
                pending.fail(InferenceError(503, "the request's shared memory is gone"))
                return
            actions = np.array(view(slot.buffer, layout))
        else:
            actions = np.frombuffer(result.inline, layout.dtype).reshape(layout.shape).copy()
        timings = {
            "queue_ms": (pending.dispatched - pending.admitted) * 1000 + done.queued_ms,
            "inference_ms": done.inference_ms,
            **done.timings,
        }
        pending.resolve((actions, timings))

    def _on_timeout(self) -> None:
        self._timed_out = True
        self._worker.kill()

    def _on_exit(self, code: int | None) -> None:
        self._batcher.paused = True
        self._cancel_timeouts()
        if self._timed_out:
            self._timed_out = False
            self._fail_in_flight(
                f"inference took longer than {self.settings.inference_timeout_s:g} s; "
                "the worker was stopped and is being restarted",
                status_code=504,
            )
        else:
            log.error("inference worker exited with code %s", code)
            how = "" if code is None else f" (code {code})"  # a shared worker's code is unknown
            self._fail_in_flight(
                f"the inference worker exited{how} while running this request; "
                "it is being restarted"
            )
        if not self._closing:
            self._restarter = asyncio.get_running_loop().create_task(self._restart())

    async def _restart(self) -> None:
        delay = 0.1
        while not self._closing:
            try:
                await self._worker.start()
            except WorkerStartError as exc:
                self._start_error = f"the inference worker is down: {exc}"
                log.error("%s; retrying in %.1f s", self._start_error, delay)
                for pending in self._batcher.drain():
                    pending.fail(InferenceError(503, self._start_error, retry_after=delay))
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_RESTART_DELAY_S)
                continue
            self._start_error = ""
            self._batcher.resume()
            return

    def _fail_in_flight(self, detail: str, *, status_code: int = 503) -> None:
        self._cancel_timeouts()
        in_flight, self._in_flight = self._in_flight, {}
        for pending in in_flight.values():
            pending.fail(InferenceError(status_code, detail, retry_after=RETRY_AFTER_S))

    def _finish_batch(self, batch_id: int) -> None:
        job_ids, timer = self._batches.pop(batch_id, ((), None))
        if timer is not None:
            timer.cancel()
        for job_id in job_ids:  # a job the reply did not name
            self._in_flight.pop(job_id, None)
        self._batcher.resume()

    def _cancel_timeouts(self) -> None:
        batches, self._batches = self._batches, {}
        for _, timer in batches.values():
            timer.cancel()

"""The inference worker: a separate process that owns the policy and runs batches through it.

It reads `Batch` records from its entrypoints, maps each job's slot, builds `PolicyInput`s whose
arrays are read-only views of shared memory, calls ``policy.infer_batch`` once for the batches
waiting (up to `max_batch` jobs in all) and writes each chunk back into its job's slot. A policy
that raises fails its batches, not the worker. SIGINT, SIGTERM and SIGHUP are ignored (Ctrl-C,
``kill -- -PGID`` and a closed terminal reach the whole process group; the entrypoints finish
the requests in flight and then stop the worker), and the worker exits when told to or when
the pipe of the process that started it closes, or at once when that process dies
(`end_with_parent`: a process killed outright closes its pipe too, but a worker inside a long
policy call would only read it after), so it never outlives the server.

It is started as ``python -m vla_client.server.worker FD [LISTENER_FD]`` rather than by
multiprocessing, so the entrypoint's main module is never re-imported (a script without a
``__main__`` guard still works). The first message on the pipe, `Start`, is the starter's
``sys.path``, the packed policy (`handoff`) and `max_batch`; the worker unpacks the policy, runs
its ``load()`` and ``warm_up()`` (`start_policy`) and answers `Ready` or `StartFailed`. With a
listening Unix socket the worker is shared: more entrypoint processes connect there
(``vla-client serve --api-servers N``), and batches from all of them are merged into one
policy call, as a serving engine batches across its API servers.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from collections import deque
from typing import Any

from vla_client.errors import PolicyInputError, PolicyOutputError, PolicyStartError
from vla_client.protocol.rtc import RTCRequest
from vla_client.server.engine.lifeline import end_with_parent
from vla_client.server.policy import Policy, PolicyInput, check_actions, start_policy
from vla_client.server.worker.channel import Channel
from vla_client.server.worker.handoff import unpack_policy
from vla_client.server.worker.messages import (
    RTC_PREFIX_KEY,
    STATE_KEY,
    Batch,
    BatchDone,
    BatchFailed,
    Job,
    Ready,
    Result,
    StartFailed,
    Stop,
    decode_order,
    decode_start,
    encode,
)
from vla_client.server.worker.shm import Attachments, plan_layout, view

Order = tuple[Channel, Batch, float]
"""A batch the worker has read: from which entrypoint, and when (``time.perf_counter``)."""


def worker_main(fd: int, listener_fd: int | None = None) -> None:
    """Process body: read the policy, load it, say `Ready`, then serve batches until stopped."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # If the starter is already gone, getppid() names someone else and the pipe is closed:
    # the first recv below fails and the worker ends.
    end_with_parent(os.getppid(), signal.SIGKILL)
    control = Channel(socket.socket(fileno=fd))
    try:
        (packed,) = control.receive()  # the starter sends nothing else before `Ready`
        start = decode_start(packed)
        sys.path[:] = start.sys_path
        policy = unpack_policy(start.policy)
    except Exception as exc:
        _refuse(control, f"the worker cannot unpack the policy: {_describe(exc)}")
        return
    try:
        start_policy(policy)
        decodes_jpeg = bool(policy.decodes_jpeg())
    except Exception as exc:
        _refuse(control, str(exc) if isinstance(exc, PolicyStartError) else _describe(exc))
        return
    control.send(encode(Ready(os.getpid(), decodes_jpeg=decodes_jpeg)))
    max_batch = start.max_batch
    listener = socket.socket(fileno=listener_fd) if listener_fd is not None else None
    entrypoints = Entrypoints(control, listener)
    try:
        while entrypoints.read():
            orders = entrypoints.take(max_batch)
            if orders:
                for conn, reply in run_batches(policy, orders, entrypoints.attachments):
                    entrypoints.reply(conn, reply)
    finally:
        entrypoints.close()
        policy.close()


class Entrypoints:
    """The worker's connections, the starter's first, and the batches they sent, in order.

    Each connection has its own `Attachments`: slots belong to the entrypoint that made them,
    and two entrypoints number their slots alike.
    """

    def __init__(self, control: Channel, listener: socket.socket | None) -> None:
        self._control = control
        self._listener = listener
        self._selector = selectors.DefaultSelector()
        self._selector.register(control, selectors.EVENT_READ)
        if listener is not None:
            self._selector.register(listener, selectors.EVENT_READ)
        self.attachments: dict[Channel, Attachments] = {control: Attachments()}
        self._waiting: deque[Order] = deque()

    def read(self) -> bool:
        """Queue every batch that has arrived (waiting for one if none is queued) and accept
        new entrypoints; False once told to stop or the starter is gone.

        Each connection is read until it has nothing more: an entrypoint of a shared worker
        sends its requests as they come, several while a batch runs, and the next batch
        should take them all, from every entrypoint."""
        ready: list[object] = [self._control]  # the starter's pipe alone: no select call
        selected = self._listener is not None or bool(self._waiting)
        if selected:
            ready = [key.fileobj for key, _ in self._selector.select(0 if self._waiting else None)]
        for source in ready:
            if isinstance(source, socket.socket):
                self._accept(source)
                continue
            assert isinstance(source, Channel)
            if not self._drain(source, wait=not selected):
                return False
        return True

    def _drain(self, source: Channel, *, wait: bool) -> bool:
        """Queue the batches `source` sent, until it has nothing more; False once told to
        stop or the starter is gone (an entrypoint that is gone is dropped).

        With `wait` (the starter of a worker no other entrypoint shares: it sends a batch and
        waits for its reply before the next) one read, which waits, takes what it sent; one
        more, to find nothing, would be a system call and an exception before every batch."""
        once = wait
        while True:  # until the socket has nothing more (a read never blocks after the first)
            try:  # a part of a frame is finished by a later read
                frames = source.receive(wait=wait)
            except (EOFError, OSError):
                if source is self._control:
                    return False
                self._drop(source)
                return True
            if not frames:
                return True
            wait = False
            arrived = time.perf_counter()
            for frame in frames:
                order = decode_order(frame)
                if isinstance(order, Stop):
                    return False
                self._waiting.append((source, order, arrived))
            if once:
                return True

    def take(self, max_batch: int) -> list[Order]:
        """The first waiting batches whose jobs fit in `max_batch` together (always at least
        one); batches of entrypoints that went away are dropped."""
        taken: list[Order] = []
        jobs = 0
        while self._waiting and (not taken or jobs + len(self._waiting[0][1].jobs) <= max_batch):
            order = self._waiting.popleft()
            if order[0] in self.attachments:
                taken.append(order)
                jobs += len(order[1].jobs)
        return taken

    def reply(self, conn: Channel, reply: BatchDone | BatchFailed) -> None:
        if conn not in self.attachments:  # the entrypoint went away while its batch ran
            return
        try:
            conn.send(encode(reply))
        except OSError:
            self._drop(conn)

    def close(self) -> None:
        for attachments in self.attachments.values():
            attachments.close()
        self._selector.close()

    def _accept(self, listener: socket.socket) -> None:
        conn = Channel(listener.accept()[0])
        try:
            conn.send(encode(Ready(os.getpid())))
        except OSError:
            conn.close()
            return
        self._selector.register(conn, selectors.EVENT_READ)
        self.attachments[conn] = Attachments()

    def _drop(self, conn: Channel) -> None:
        self._selector.unregister(conn)
        self.attachments.pop(conn).close()
        conn.close()


def run_batches(
    policy: Policy, orders: list[Order], attachments: dict[Channel, Attachments]
) -> list[tuple[Channel, BatchDone | BatchFailed]]:
    """One policy call for every job in `orders`; chunks go back into the jobs' slots."""
    jobs: list[Job] = []
    buffers: list[memoryview] = []
    for conn, batch, _ in orders:
        mapped = attachments[conn]
        for index in batch.forget:
            mapped.forget(index)
        jobs.extend(batch.jobs)
        buffers.extend(mapped.buffer(job.slot_index, job.slot_name) for job in batch.jobs)
    inputs = [_policy_input(job, buffer) for job, buffer in zip(jobs, buffers, strict=True)]
    start = time.perf_counter()
    try:
        chunks = _chunks(policy, inputs)
        if len(chunks) != len(inputs):
            raise ValueError(f"policy returned {len(chunks)} chunks for {len(inputs)} observations")
        timings = dict(policy.batch_timings())
    except Exception as exc:
        error, text = _describe(exc), "".join(traceback.format_exception(exc))
        return [(conn, BatchFailed(batch.batch_id, error, text)) for conn, batch, _ in orders]
    inference_ms = (time.perf_counter() - start) * 1000
    del inputs
    results = iter(map(_store, jobs, chunks, buffers, [policy] * len(jobs)))
    return [
        (
            conn,
            BatchDone(
                batch.batch_id,
                tuple(next(results) for _ in batch.jobs),
                inference_ms,
                timings,
                queued_ms=max(start - arrived, 0.0) * 1000,
            ),
        )
        for conn, batch, arrived in orders
    ]


def _policy_input(job: Job, buffer: memoryview) -> PolicyInput:
    readonly = buffer.toreadonly()
    arrays = {layout.key: view(readonly, layout) for layout in job.arrays}
    state = arrays.pop(STATE_KEY, None)
    prefix = arrays.pop(RTC_PREFIX_KEY, None)
    rtc = None
    if prefix is not None and job.rtc_delay is not None and job.rtc_horizon is not None:
        rtc = RTCRequest(prefix.copy(), job.rtc_delay, job.rtc_horizon)
    return PolicyInput(
        images=arrays,
        state=state,
        task=job.task,
        action_horizon=job.action_horizon,
        num_inference_steps=job.num_inference_steps,
        seed=job.seed,
        rtc=rtc,
    )


def _chunks(policy: Policy, inputs: list[PolicyInput]) -> list[Any]:
    """The policy's chunk for each input, or its `PolicyInputError` for one it cannot read:
    a batch the policy refuses is asked again one input at a time, so the refusal is told to
    its own request only."""
    try:
        return policy.infer_batch(inputs)
    except PolicyInputError as exc:
        if len(inputs) == 1:
            return [exc]
    chunks: list[Any] = []
    for one in inputs:
        try:
            chunks.extend(policy.infer_batch([one]))
        except PolicyInputError as exc:
            chunks.append(exc)
    return chunks


def _store(job: Job, chunk: Any, buffer: memoryview, policy: Policy) -> Result:
    """The job's chunk, checked, into its slot (inline when it does not fit); a chunk that
    fails `check_actions`, or the policy's refusal of the job's input, fails this job only."""
    if isinstance(chunk, PolicyInputError):
        return Result(job.job_id, None, error=str(chunk), refused=True)
    try:
        actions = check_actions(chunk, policy.spec, job.action_horizon)
    except PolicyOutputError as exc:
        return Result(job.job_id, None, error=str(exc))
    (layout,), needed = plan_layout({"actions": actions}, job.results_offset)
    if needed > len(buffer):
        return Result(job.job_id, layout, inline=actions.tobytes())
    view(buffer, layout)[...] = actions
    return Result(job.job_id, layout)


def _refuse(control: Channel, error: str) -> None:
    with contextlib.suppress(OSError):  # the starter is gone: nobody to tell
        control.send(encode(StartFailed(error)))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"

"""The inference worker: a separate process that owns the policy and runs batches through it.

It reads `Batch` records from its pipe, maps each job's slot, builds `PolicyInput`s whose arrays
are read-only views of shared memory, calls ``policy.infer_batch`` once for the whole batch and
writes each chunk back into its job's slot. A policy that raises fails its batch, not the
worker. SIGINT and SIGTERM are ignored (Ctrl-C and ``kill -- -PGID`` reach the whole process
group; the entrypoint finishes the requests in flight and then stops its worker), and the worker
exits when told to or when its pipe closes, so it never outlives the entrypoint.

It is started as ``python -m vla_client.server.worker FD`` rather than by multiprocessing, so
the entrypoint's main module is never re-imported (a script without a ``__main__`` guard still
works). The first message on the pipe is the entrypoint's ``sys.path`` and the pickled policy.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from vla_client.server.policy import Policy, PolicyInput
from vla_client.server.worker.messages import (
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
    encode,
)
from vla_client.server.worker.shm import Attachments, plan_layout, view


def worker_main(fd: int) -> None:
    """Process body: read the policy, load it, say `Ready`, then serve batches until stopped."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    conn = Connection(fd)
    try:
        sys_path, pickled_policy = conn.recv()
        sys.path[:] = sys_path
        policy: Policy = pickle.loads(pickled_policy)
        load = getattr(policy, "load", None)
        if callable(load):
            load()
    except Exception as exc:
        conn.send(StartFailed(_describe(exc)))
        return
    conn.send(Ready(os.getpid()))
    attachments = Attachments()
    try:
        while True:
            try:
                order = decode_order(conn.recv_bytes())
            except (EOFError, OSError):
                break
            if isinstance(order, Stop):
                break
            conn.send_bytes(encode(run_batch(policy, order, attachments)))
    finally:
        attachments.close()
        policy.close()


def run_batch(policy: Policy, batch: Batch, attachments: Attachments) -> BatchDone | BatchFailed:
    """One policy call for every job in `batch`; chunks go back into the jobs' slots."""
    for index in batch.forget:
        attachments.forget(index)
    buffers = [attachments.buffer(job.slot_index, job.slot_name) for job in batch.jobs]
    inputs = [_policy_input(job, buffer) for job, buffer in zip(batch.jobs, buffers, strict=True)]
    start = time.perf_counter()
    try:
        chunks = policy.infer_batch(inputs)
        if len(chunks) != len(inputs):
            raise ValueError(f"policy returned {len(chunks)} chunks for {len(inputs)} observations")
        arrays = [_as_chunk(chunk) for chunk in chunks]
    except Exception as exc:
        return BatchFailed(batch.batch_id, _describe(exc))
    inference_ms = (time.perf_counter() - start) * 1000
    del inputs
    results = tuple(map(_store, batch.jobs, arrays, buffers))
    return BatchDone(batch.batch_id, results, inference_ms)


def _policy_input(job: Job, buffer: memoryview) -> PolicyInput:
    readonly = buffer.toreadonly()
    arrays = {layout.key: view(readonly, layout) for layout in job.arrays}
    state = arrays.pop(STATE_KEY, None)
    return PolicyInput(
        images=arrays,
        state=state,
        task=job.task,
        action_horizon=job.action_horizon,
        num_inference_steps=job.num_inference_steps,
        seed=job.seed,
    )


def _as_chunk(chunk: Any) -> np.ndarray:
    array = np.asarray(chunk, dtype=np.float32)
    if array.ndim not in (2, 3) or 0 in array.shape:
        raise ValueError(f"policy returned actions of shape {array.shape}; expected [H, D]")
    return array


def _store(job: Job, chunk: np.ndarray, buffer: memoryview) -> Result:
    (layout,), needed = plan_layout({"actions": chunk}, job.results_offset)
    if needed > len(buffer):
        return Result(job.job_id, layout, inline=chunk.tobytes())
    view(buffer, layout)[...] = chunk
    return Result(job.job_id, layout)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"

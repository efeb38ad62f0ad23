"""What entrypoint and worker say to each other over their pipe: small, array-free records.

Arrays never appear here: frames, state and actions sit in shared-memory slots and these records
carry only their `ArrayLayout`s, so each pickle is a few hundred bytes whatever the image size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vla_client.server.worker.shm import ArrayLayout, Positional

STATE_KEY = "\0state"  # cannot clash with a camera name from JSON or msgpack keys


@dataclass(frozen=True)
class Job(Positional):
    """One observation for the worker: where its arrays are, and its plain parameters."""

    job_id: int
    slot_index: int
    slot_name: str
    arrays: tuple[ArrayLayout, ...]
    results_offset: int  # where in the slot the worker may write this job's chunk
    task: str
    action_horizon: int | None
    num_inference_steps: int | None
    seed: int | None


@dataclass(frozen=True)
class Batch(Positional):
    """Jobs to run through the policy in one call, and slots the worker should unmap."""

    batch_id: int
    jobs: tuple[Job, ...]
    forget: tuple[int, ...] = ()


@dataclass(frozen=True)
class Result(Positional):
    """One job's chunk: its layout in the job's slot, or the array itself when it did not fit."""

    job_id: int
    layout: ArrayLayout | None
    inline: np.ndarray | None = None


@dataclass(frozen=True)
class BatchDone(Positional):
    batch_id: int
    results: tuple[Result, ...]
    inference_ms: float


@dataclass(frozen=True)
class BatchFailed:
    """The policy raised; `error` is ``"TypeName: message"``."""

    batch_id: int
    error: str


@dataclass(frozen=True)
class Ready:
    """Sent once by a worker that has loaded its policy."""

    pid: int


@dataclass(frozen=True)
class StartFailed:
    """Sent instead of `Ready` when the policy could not be loaded."""

    error: str


STOP = "stop"

"""What entrypoint and worker say to each other over their pipe: small, array-free records.

Arrays never appear here: frames, state and actions sit in shared-memory slots and these records
carry only their `ArrayLayout`s, so each message is about a hundred bytes whatever the image
size. They are msgspec structs packed as msgpack arrays (as vLLM's engine does for its own
messages): one C call encodes or decodes a whole batch, where pickle ran a Python constructor
per record, which showed on the hand-off's latency when the worker woke with cold caches.
Startup (the pickled policy, `Ready`, `StartFailed`) uses plain pickle through the same pipe.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from vla_client.server.worker.shm import ArrayLayout

STATE_KEY = "\0state"  # cannot clash with a camera name from JSON or msgpack keys


class Job(msgspec.Struct, frozen=True, array_like=True):
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


class Batch(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """Jobs to run through the policy in one call, and slots the worker should unmap."""

    batch_id: int
    jobs: tuple[Job, ...]
    forget: tuple[int, ...] = ()


class Stop(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """Finish and exit."""


class Result(msgspec.Struct, frozen=True, array_like=True):
    """One job's chunk: `layout` in the job's slot, or its bytes in `inline` when it did not fit
    (then `layout.offset` means nothing)."""

    job_id: int
    layout: ArrayLayout
    inline: bytes | None = None


class BatchDone(msgspec.Struct, frozen=True, array_like=True, tag=True):
    batch_id: int
    results: tuple[Result, ...]
    inference_ms: float


class BatchFailed(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """The policy raised; `error` is ``"TypeName: message"``."""

    batch_id: int
    error: str


encode = msgspec.msgpack.Encoder().encode
decode_order = msgspec.msgpack.Decoder(Batch | Stop).decode
decode_reply = msgspec.msgpack.Decoder(BatchDone | BatchFailed).decode


@dataclass(frozen=True)
class Ready:
    """Sent once by a worker that has loaded its policy."""

    pid: int


@dataclass(frozen=True)
class StartFailed:
    """Sent instead of `Ready` when the policy could not be loaded."""

    error: str

"""What entrypoint and worker say to each other over their pipe: small, array-free records.

Arrays never appear here: frames, state and actions sit in shared-memory slots and these records
carry only their `ArrayLayout`s, so each message is about a hundred bytes whatever the image
size. They are msgspec structs packed as msgpack arrays (as vLLM's engine does for its own
messages): one C call encodes or decodes a whole batch, where pickle ran a Python constructor
per record, which showed on the hand-off's latency when the worker woke with cold caches.
The entrypoint's first message, `Start`, carries its ``sys.path`` and the policy, packed by
`handoff.pack_policy` (the only pickle in the server); the worker answers `Ready` or
`StartFailed`, and says `Ready` again to each entrypoint that connects to a shared worker
(``vla-client serve --api-servers N``).
"""

from __future__ import annotations

import msgspec

from vla_client.server.worker.shm import ArrayLayout

STATE_KEY = "\0state"  # cannot clash with a camera name from JSON or msgpack keys
RTC_PREFIX_KEY = "\0rtc_prefix"  # real-time chunking's prefix, an array like the state


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
    rtc_delay: int | None = None  # with the prefix array: real-time chunking's d and s
    rtc_horizon: int | None = None


class Batch(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """Jobs to run through the policy in one call, and slots the worker should unmap."""

    batch_id: int
    jobs: tuple[Job, ...]
    forget: tuple[int, ...] = ()


class Stop(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """Finish and exit."""


class Start(msgspec.Struct, frozen=True, array_like=True):
    """The starter's first message: its ``sys.path``, the packed policy and the batch bound."""

    sys_path: tuple[str, ...]
    policy: bytes
    max_batch: int


class Result(msgspec.Struct, frozen=True, array_like=True):
    """One job's chunk: `layout` in the job's slot, or its bytes in `inline` when it did not fit
    (then `layout.offset` means nothing); or, for a chunk that failed `check_actions`, no
    layout and the `error` its request is answered with (500); `refused` when that error is the
    policy's refusal of the job's observation (`PolicyInputError`: 400)."""

    job_id: int
    layout: ArrayLayout | None
    inline: bytes | None = None
    error: str | None = None
    refused: bool = False


class BatchDone(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """The batch ran: one `Result` per job, the policy call's time, the stage timings the
    policy measured itself (`Policy.batch_timings`) and how long the batch waited in the
    worker for the policy call it ran in (behind other entrypoints' batches)."""

    batch_id: int
    results: tuple[Result, ...]
    inference_ms: float
    timings: dict[str, float] = {}
    queued_ms: float = 0.0


class BatchFailed(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """The policy raised; `error` is ``"TypeName: message"``, `traceback` the exception's
    traceback as the worker formatted it (the entrypoint logs it: the policy's file and line)."""

    batch_id: int
    error: str
    traceback: str = ""


class Ready(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """The worker has loaded and warmed up its policy and takes batches; `decodes_jpeg` is
    what the loaded policy's `Policy.decodes_jpeg` said."""

    pid: int
    decodes_jpeg: bool = False


class StartFailed(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """Sent instead of `Ready`: why the policy could not be unpacked, loaded or warmed up."""

    error: str


encode = msgspec.msgpack.Encoder().encode
decode_order = msgspec.msgpack.Decoder(Batch | Stop).decode
decode_reply = msgspec.msgpack.Decoder(BatchDone | BatchFailed).decode
decode_greeting = msgspec.msgpack.Decoder(Ready | StartFailed).decode
decode_start = msgspec.msgpack.Decoder(Start).decode

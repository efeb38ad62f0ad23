"""A family's request through the server's one pipeline, and what every family's config reads.

The families' routes (`vla_client.server.edge.families`) read their own documents, then hand
the frames, the state and the task to `run_policy`, which puts them in the action API's request
document and sends it down the same path as every other request: `Pipeline.decode_document`
(what a msgpack body becomes once parsed: every frame an ndarray within the server's limits,
without packing the frames again), then `Pipeline.answer` (checked against the policy, run by
the runner under the inference timeout, recorded when asked). The chunk it
answers is the family's to put in its own reply; a failure is the pipeline's own exception, for
the route to turn into the family's error with `failure`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from vla_client.errors import CodecError
from vla_client.server.engine.pipeline import Pipeline


async def run_policy(
    pipeline: Pipeline,
    images: Mapping[str, np.ndarray],
    state: np.ndarray | None,
    task: str,
    *,
    started: float | None = None,
) -> np.ndarray:
    """The policy's ``[H, D]`` chunk for one observation, by the server's one pipeline.
    `started` is when the family's request arrived (`time.perf_counter`), for the timings."""
    started = time.perf_counter() if started is None else started
    observation: dict[str, Any] = {"images": dict(images)}
    if state is not None:
        observation["state"] = np.asarray(state)
    document = {"input": {"task": task, "observation": observation}}
    decoded = await pipeline.decode_document(document, "msgpack")  # its arrays, not re-packed
    reply = await pipeline.answer(decoded, form="raw", started=started)
    return np.asarray(reply["actions"], dtype=np.float32)


def split_columns(split: Mapping[str, int], width: int, what: str) -> dict[str, slice]:
    """The columns of a ``width``-wide vector each part of `split` fills, in its order;
    `ValueError` naming the lengths when they do not add up to `width`."""
    total = sum(split.values())
    if total != width:
        raise ValueError(
            f"the {what} split {dict(split)} adds up to {total}; the policy's {what} has {width}"
        )
    columns, start = {}, 0
    for key, dim in split.items():
        columns[key] = slice(start, start + dim)
        start += dim
    return columns


def per_key_actions(chunk: np.ndarray, columns: Mapping[str, slice]) -> dict[str, np.ndarray]:
    """The ``[H, D]`` chunk as per-key ``(1, H, d)`` arrays, the columns each key fills (the
    batch axis of one that GR00T and vLLM-Omni answer with)."""
    return {key: np.ascontiguousarray(chunk[np.newaxis, :, part]) for key, part in columns.items()}


def text_task(value: Any, where: str) -> str:
    """A request's task text; `CodecError` naming `where` for anything else."""
    if not isinstance(value, str):
        raise CodecError(f"{where} must be text, got {type(value).__name__}")
    return value

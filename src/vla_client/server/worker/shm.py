"""Shared-memory slots: how frames and action chunks cross between entrypoint and worker.

Each admitted request owns one slot, a POSIX shared-memory segment the entrypoint creates and
reuses. The entrypoint copies the decoded arrays into its slot and sends the worker only their
`ArrayLayout`s (name, dtype, shape, offset: a few bytes of pickle); the worker maps the same
segment and reads the arrays in place, without a copy. Slots grow when a request needs more
room, and every segment name starts with `SEGMENT_PREFIX` so a leak is easy to spot in
``/dev/shm``. Segments are created by the entrypoint only, and unlinked by it on close; if the
entrypoint is killed outright, its resource tracker unlinks them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory

import numpy as np

SEGMENT_PREFIX = "vlac_"
MIN_SLOT_BYTES = 1 << 20
_ALIGN = 64


class Positional:
    """Pickles as its class and field values, half the time and bytes of a dataclass's default.

    Every request sends a few of these records each way, so their pickling is part of its latency.
    """

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return (type(self), tuple(self.__dict__.values()))


@dataclass(frozen=True)
class ArrayLayout(Positional):
    """Where one array sits in a slot."""

    key: str
    dtype: str
    shape: tuple[int, ...]
    offset: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


def plan_layout(arrays: Mapping[str, np.ndarray]) -> tuple[list[ArrayLayout], int]:
    """Aligned offsets for `arrays` packed one after another; returns layouts and bytes needed."""
    layouts: list[ArrayLayout] = []
    offset = 0
    for key, array in arrays.items():
        layouts.append(ArrayLayout(key, array.dtype.str, tuple(array.shape), offset))
        offset += -(-array.nbytes // _ALIGN) * _ALIGN
    return layouts, offset


def view(buffer: memoryview, layout: ArrayLayout) -> np.ndarray:
    """The array `layout` describes, as a view of `buffer` (no copy)."""
    return np.ndarray(layout.shape, np.dtype(layout.dtype), buffer=buffer, offset=layout.offset)


def write_arrays(
    buffer: memoryview,
    arrays: Mapping[str, np.ndarray],
    layouts: list[ArrayLayout] | None = None,
) -> list[ArrayLayout]:
    """Copy `arrays` into `buffer` (one memcpy each); the caller made sure they fit.

    `layouts` is `plan_layout`'s answer when the caller already has it.
    """
    if layouts is None:
        layouts, _ = plan_layout(arrays)
    for layout, array in zip(layouts, arrays.values(), strict=True):
        np.copyto(view(buffer, layout), array, casting="no")
    return layouts


class Slot:
    """One reusable segment, owned by the entrypoint; `name` changes when it grows."""

    def __init__(self, pool_tag: str, index: int) -> None:
        self._pool_tag = pool_tag
        self.index = index
        self._generation = 0
        self._segment: shared_memory.SharedMemory | None = None

    @property
    def name(self) -> str:
        assert self._segment is not None, "slot used before reserve()"
        return self._segment.name.lstrip("/")

    @property
    def buffer(self) -> memoryview:
        assert self._segment is not None, "slot used before reserve()"
        buffer = self._segment.buf
        assert buffer is not None
        return buffer

    def reserve(self, nbytes: int) -> None:
        """Make sure the segment holds at least `nbytes`, replacing it with a bigger one if not."""
        if self._segment is not None and self._segment.size >= nbytes:
            return
        self.release()
        size = max(MIN_SLOT_BYTES, 1 << max(nbytes - 1, 1).bit_length())
        self._generation += 1
        name = f"{SEGMENT_PREFIX}{self._pool_tag}_{self.index}_{self._generation}"
        self._segment = shared_memory.SharedMemory(name=name, create=True, size=size)

    def release(self) -> None:
        """Unmap and unlink the segment."""
        segment, self._segment = self._segment, None
        if segment is None:
            return
        segment.close()
        with contextlib.suppress(FileNotFoundError):
            segment.unlink()


class SlotPool:
    """A fixed number of slots: one per request the server admits at a time."""

    def __init__(self, size: int) -> None:
        tag = f"{os.getpid()}_{secrets.token_hex(3)}"
        self._free = [Slot(tag, index) for index in reversed(range(size))]
        self._all = list(reversed(self._free))

    @property
    def available(self) -> int:
        return len(self._free)

    def acquire(self) -> Slot | None:
        """A free slot, or None when every slot is in use."""
        return self._free.pop() if self._free else None

    def slot(self, index: int) -> Slot:
        return self._all[index]

    def give_back(self, slot: Slot) -> None:
        self._free.append(slot)

    def close(self) -> None:
        """Unlink every segment; call once no process reads them any more."""
        for slot in self._all:
            slot.release()


class Attachments:
    """The worker's mappings of the entrypoint's slots, refreshed when a slot's name changes."""

    def __init__(self) -> None:
        self._segments: dict[int, shared_memory.SharedMemory] = {}

    def buffer(self, index: int, name: str) -> memoryview:
        segment = self._segments.get(index)
        if segment is None or segment.name.lstrip("/") != name:
            if segment is not None:
                _close_quietly(segment)
            segment = _attach(name)
            self._segments[index] = segment
        buffer = segment.buf
        assert buffer is not None
        return buffer

    def close(self) -> None:
        for segment in self._segments.values():
            _close_quietly(segment)
        self._segments.clear()


def _attach(name: str) -> shared_memory.SharedMemory:
    """Map an existing segment without handing it to this process's resource tracker.

    The tracker unlinks what it tracks when the process exits; the entrypoint owns the segments,
    so the worker must not track them (Python 3.13 has ``track=False`` for exactly this).
    """
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name=name, track=False)
    segment = shared_memory.SharedMemory(name=name)
    resource_tracker.unregister(segment._name, "shared_memory")  # type: ignore[attr-defined]
    return segment


def _close_quietly(segment: shared_memory.SharedMemory) -> None:
    # BufferError: a policy kept a view; the mapping goes when the view does.
    with contextlib.suppress(BufferError):
        segment.close()

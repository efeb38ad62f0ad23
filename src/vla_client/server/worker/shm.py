"""Shared-memory slots: how frames and action chunks cross between entrypoint and worker.

Each request in the server holds one slot, a POSIX shared-memory segment the entrypoint creates
and reuses, through a `Lease`. A msgpack body is read straight into its slot, so the arrays
decoded from it already lie there (`Slot.locate` finds them); other arrays are copied in after
the body. The worker gets only `ArrayLayout`s (name, dtype, shape, offset: a few dozen
bytes), maps the same segment and reads the arrays in place. Slots grow when a request needs
more room, and every segment name starts with `SEGMENT_PREFIX` so a leak is easy to spot in
``/dev/shm``. Segments are created by the entrypoint only, and unlinked by it when they are
replaced or the pool closes; if the entrypoint is killed outright, its resource tracker unlinks
them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import sys
from collections.abc import Mapping
from multiprocessing import resource_tracker, shared_memory

import msgspec
import numpy as np

SEGMENT_PREFIX = "vlac_"
MIN_SLOT_BYTES = 1 << 20
_ALIGN = 64


class ArrayLayout(msgspec.Struct, frozen=True, array_like=True):
    """Where one array sits in a slot."""

    key: str
    dtype: str
    shape: tuple[int, ...]
    offset: int


def plan_layout(arrays: Mapping[str, np.ndarray], start: int = 0) -> tuple[list[ArrayLayout], int]:
    """Aligned offsets for `arrays` packed one after another from `start`; returns the layouts
    and the offset just past the last one."""
    layouts: list[ArrayLayout] = []
    offset = _aligned(start)
    for key, array in arrays.items():
        layouts.append(ArrayLayout(key, array.dtype.str, tuple(array.shape), offset))
        offset = _aligned(offset + array.nbytes)
    return layouts, offset


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


def _address(array: np.ndarray) -> int:
    # Not `array.ctypes.data`: that builds a Python helper object, a quarter slower when cold.
    address: int = array.__array_interface__["data"][0]
    return address


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
    """One reusable segment, owned by the entrypoint; `name` changes when it grows.

    `used` is how many bytes at its start hold a request body (read there by a `Lease`).
    """

    def __init__(self, pool_tag: str, index: int) -> None:
        self._pool_tag = pool_tag
        self.index = index
        self.used = 0
        self._generation = 0
        self._segment: shared_memory.SharedMemory | None = None
        self._address = 0
        self._retired: list[shared_memory.SharedMemory] = []

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

    def fits(self, nbytes: int) -> bool:
        return self._segment is not None and self._segment.size >= nbytes

    def reserve(self, nbytes: int) -> None:
        """Make sure the segment holds at least `nbytes`, replacing it with a bigger one if not.

        Arrays still viewing the old segment stay valid: it is unlinked at once and unmapped
        once the last view of it is gone.
        """
        self._close_retired()
        if self.fits(nbytes):
            return
        self.release()
        size = max(MIN_SLOT_BYTES, 1 << max(nbytes - 1, 1).bit_length())
        self._generation += 1
        name = f"{SEGMENT_PREFIX}{self._pool_tag}_{self.index}_{self._generation}"
        self._segment = shared_memory.SharedMemory(name=name, create=True, size=size)
        self._address = _address(np.frombuffer(self.buffer, np.uint8, count=1))
        self.used = 0

    def reset(self) -> None:
        """The request using the slot is done: forget its body, unmap outgrown segments."""
        self.used = 0
        self._close_retired()

    def locate(self, array: np.ndarray) -> int | None:
        """Where `array` lies in the segment, or None when it is not wholly and plainly there."""
        if self._segment is None or not array.flags.c_contiguous:
            return None
        offset = _address(array) - self._address
        if 0 <= offset <= self._segment.size - array.nbytes and offset % array.itemsize == 0:
            return offset
        return None

    def release(self) -> None:
        """Unlink the segment, and unmap it once nothing views it."""
        segment, self._segment = self._segment, None
        self.used = 0
        if segment is not None:
            with contextlib.suppress(FileNotFoundError):
                segment.unlink()
            self._retired.append(segment)
        self._close_retired()

    def _close_retired(self) -> None:
        self._retired = [segment for segment in self._retired if not _closed(segment)]


class Lease:
    """A request's hold on a slot, from the body's arrival to the worker's reply.

    The entrypoint holds it while it reads, decodes and answers; a queued or running job holds
    it until the worker is done with the slot. The slot goes back when both let go, so a
    client that gives up early never frees a slot the worker still reads.
    """

    def __init__(self, pool: SlotPool, slot: Slot) -> None:
        self.slot = slot
        self._pool = pool
        self._holds = 1

    def reserve(self, nbytes: int) -> memoryview:
        """A writable view of the slot's first `nbytes`, for a request body to be read into."""
        self.slot.reserve(nbytes)
        self.slot.used = nbytes
        return self.slot.buffer[:nbytes]

    def hold(self) -> None:
        self._holds += 1

    def release(self) -> None:
        assert self._holds > 0, "lease released more often than held"
        self._holds -= 1
        if self._holds == 0:
            self._pool.give_back(self.slot)


class SlotPool:
    """Slots for the requests in the server; up to `keep` idle ones stay mapped for reuse.

    There is always a slot to lend (a request reading its body has one, however slowly it
    arrives); how many requests may queue is the runner's limit, not the pool's. Slots beyond
    `keep` are unlinked when given back, and their indices collected in `forgotten` so the
    worker can unmap them too.
    """

    def __init__(self, keep: int) -> None:
        self._tag = f"{os.getpid()}_{secrets.token_hex(3)}"
        self._keep = keep
        self._indices = itertools.count()
        self._free: list[Slot] = []
        self._live: dict[int, Slot] = {}
        self._closed = False
        self.forgotten: list[int] = []

    @property
    def in_use(self) -> int:
        """Slots held by requests now."""
        return len(self._live) - len(self._free)

    def lend(self) -> Lease:
        """A slot for one request, held once by the caller."""
        slot = self._free.pop() if self._free else Slot(self._tag, next(self._indices))
        self._live[slot.index] = slot
        return Lease(self, slot)

    def slot(self, index: int) -> Slot:
        return self._live[index]

    def give_back(self, slot: Slot) -> None:
        slot.reset()
        if len(self._free) < self._keep and not self._closed:
            self._free.append(slot)
            return
        slot.release()
        self._live.pop(slot.index, None)
        self.forgotten.append(slot.index)

    def close(self) -> None:
        """Unlink every segment; call once the worker reads them no more.

        A request still reading its body keeps its mapping until it lets go; a slot lent or
        given back after this is unlinked as soon as it comes back.
        """
        self._closed = True
        for slot in self._live.values():
            slot.release()
        self._live.clear()
        self._free.clear()


class Attachments:
    """The worker's mappings of the entrypoint's slots, refreshed when a slot's name changes."""

    def __init__(self) -> None:
        self._mapped: dict[int, tuple[str, shared_memory.SharedMemory]] = {}

    def buffer(self, index: int, name: str) -> memoryview:
        mapped = self._mapped.get(index)
        if mapped is None or mapped[0] != name:
            if mapped is not None:
                _close_quietly(mapped[1])
            mapped = (name, _attach(name))
            self._mapped[index] = mapped
        buffer = mapped[1].buf
        assert buffer is not None
        return buffer

    def forget(self, index: int) -> None:
        """Unmap a slot the entrypoint has unlinked."""
        mapped = self._mapped.pop(index, None)
        if mapped is not None:
            _close_quietly(mapped[1])

    def close(self) -> None:
        for _, segment in self._mapped.values():
            _close_quietly(segment)
        self._mapped.clear()


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
    _closed(segment)


def _closed(segment: shared_memory.SharedMemory) -> bool:
    """Unmap `segment`; False while an array or memoryview still uses it."""
    try:
        segment.close()
    except BufferError:
        return False
    return True

"""Shared-memory slots: how frames and action chunks cross between entrypoint and worker.

Each request in the server holds one slot, a POSIX shared-memory segment the entrypoint creates
and reuses, through a `Lease`. A msgpack body is read straight into its slot, so the arrays
decoded from it already lie there (`Slot.locate` finds them); other arrays are copied in after
the body. The worker gets only `ArrayLayout`s (name, dtype, shape, offset: a few dozen
bytes), maps the same segment and reads the arrays in place. Slots grow when a request needs
more room, and every segment name starts with `SEGMENT_PREFIX` so a leak is easy to spot in
``/dev/shm``. Segments are created by the entrypoint only, and unlinked by it when they are
replaced or the pool closes; if the entrypoint is killed outright, its resource tracker unlinks
them. The worker maps them without ever telling a resource tracker (`Segment.attach`).

A segment is given up on many paths (a slot returned past the pool's `keep`, a slot that grows,
the pool closing), often while a view of it still lives: a request that timed out (408) is
abandoned with its body buffer still referenced from the exception's traceback, and arrays
decoded from a body view the slot. `Segment` is built so that this never leaks: its mapping is
freed when the last view goes, whenever that is, and `Lease` releases the body view it handed
out as soon as the request lets go of the slot.
"""

from __future__ import annotations

import _posixshmem  # type: ignore[import-not-found]  # the module SharedMemory is built on
import contextlib
import itertools
import mmap
import os
import secrets
import sys
from collections.abc import Mapping
from multiprocessing import resource_tracker

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
    array: np.ndarray = np.ndarray(
        layout.shape, np.dtype(layout.dtype), buffer=buffer, offset=layout.offset
    )
    return array


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


class Segment:
    """A POSIX shared-memory segment mapped into this process (`buf` is the whole of it).

    This is `multiprocessing.shared_memory.SharedMemory` less two of its habits, both wrong for a
    server that gives segments up while views of them may still live:

    - `SharedMemory` keeps the segment's file descriptor open beside the mapping until `close()`,
      and `close()` raises `BufferError` while any view exists. A segment dropped in that state
      (its `__del__` fails the same way) kept its descriptor, and the memory the descriptor
      pins, for the life of the process: the leak behind 408s. Here the descriptor is closed as
      soon as the mapping exists, and the mapping is owned by its `mmap` object, which unmaps
      itself (and closes the duplicate descriptor `mmap` keeps before Python 3.13) when the last
      view of it goes. A `close()` that must wait therefore frees everything later, by itself.
    - On Python before 3.13, *attaching* to an existing segment registers it with this process's
      resource tracker, which unlinks what it tracks when the process dies. The worker used to
      register and then unregister at once; a worker killed in between had its tracker unlink a
      segment the entrypoint was still using. `attach` never calls the tracker, so there is no
      such moment. `create` does register, so that if the entrypoint (the owner) is killed
      outright, its tracker unlinks the segments it made.
    """

    def __init__(self, name: str, mapping: mmap.mmap) -> None:
        self.name = name
        self.size = len(mapping)
        self._mmap = mapping
        self.buf = memoryview(mapping)

    @classmethod
    def create(cls, name: str, size: int) -> Segment:
        """A new segment of `size` bytes, owned by this process (unlink it when done)."""
        fd = _posixshmem.shm_open(f"/{name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
        try:
            os.ftruncate(fd, size)
            mapping = _map(fd, size)
        except BaseException:
            os.close(fd)
            _posixshmem.shm_unlink(f"/{name}")
            raise
        os.close(fd)
        resource_tracker.register(f"/{name}", "shared_memory")
        return cls(name, mapping)

    @classmethod
    def attach(cls, name: str) -> Segment:
        """Map an existing segment another process owns; no resource tracker is involved."""
        fd = _posixshmem.shm_open(f"/{name}", os.O_RDWR, mode=0o600)
        try:
            mapping = _map(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        return cls(name, mapping)

    def close(self) -> bool:
        """Unmap now; False while a view still uses the segment (it is unmapped when the last
        one goes, and nothing more needs doing)."""
        try:
            self.buf.release()
            self._mmap.close()
        except BufferError:
            return False
        return True

    def unlink(self) -> None:
        """Remove the name (the owner's job): the memory goes once nothing maps it."""
        with contextlib.suppress(FileNotFoundError):
            _posixshmem.shm_unlink(f"/{self.name}")
        resource_tracker.unregister(f"/{self.name}", "shared_memory")


def _map(fd: int, size: int) -> mmap.mmap:
    if sys.version_info >= (3, 13):  # the mapping needs no descriptor of its own
        return mmap.mmap(fd, size, trackfd=False)
    return mmap.mmap(fd, size)


class Slot:
    """One reusable segment, owned by the entrypoint; `name` changes when it grows.

    `used` is how many bytes at its start hold a request body (read there by a `Lease`). When
    the segment is replaced, the index is added to `forgotten` (the pool's list) so the worker
    unmaps the old one at its next batch instead of keeping it until the slot is used again.
    """

    def __init__(self, pool_tag: str, index: int, forgotten: list[int]) -> None:
        self._pool_tag = pool_tag
        self._forgotten = forgotten
        self.index = index
        self.used = 0
        self._generation = 0
        self._segment: Segment | None = None
        self._address = 0

    @property
    def name(self) -> str:
        assert self._segment is not None, "slot used before reserve()"
        return self._segment.name

    @property
    def buffer(self) -> memoryview:
        assert self._segment is not None, "slot used before reserve()"
        return self._segment.buf

    def fits(self, nbytes: int) -> bool:
        return self._segment is not None and self._segment.size >= nbytes

    def reserve(self, nbytes: int) -> None:
        """Make sure the segment holds at least `nbytes`, replacing it with a bigger one if not.

        Arrays still viewing the old segment stay valid: it is unlinked at once and unmapped
        once the last view of it is gone.
        """
        if self.fits(nbytes):
            return
        if self._segment is not None:
            self._forgotten.append(self.index)
        self.release()
        size = max(MIN_SLOT_BYTES, 1 << max(nbytes - 1, 1).bit_length())
        self._generation += 1
        name = f"{SEGMENT_PREFIX}{self._pool_tag}_{self.index}_{self._generation}"
        self._segment = Segment.create(name, size)
        self._address = _address(np.frombuffer(self.buffer, np.uint8, count=1))
        self.used = 0

    def reset(self) -> None:
        """The request using the slot is done: forget its body."""
        self.used = 0

    def locate(self, array: np.ndarray) -> int | None:
        """Where `array` lies in the segment, or None when it is not wholly and plainly there."""
        if self._segment is None or not array.flags.c_contiguous:
            return None
        offset = _address(array) - self._address
        if 0 <= offset <= self._segment.size - array.nbytes and offset % array.itemsize == 0:
            return offset
        return None

    def release(self) -> None:
        """Unlink the segment, and unmap it now or, if something still views it, when that
        view goes."""
        segment, self._segment = self._segment, None
        self.used = 0
        if segment is not None:
            segment.unlink()
            segment.close()


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
        self._view: memoryview | None = None

    def reserve(self, nbytes: int) -> memoryview:
        """A writable view of the slot's first `nbytes`, for a request body to be read into.

        The view is released when the lease ends, so a reference to it left behind (in the
        traceback of a request that timed out, say) cannot keep the segment mapped.
        """
        self.slot.reserve(nbytes)
        self.slot.used = nbytes
        self._view = self.slot.buffer[:nbytes]
        return self._view

    def hold(self) -> None:
        self._holds += 1

    def release(self) -> None:
        assert self._holds > 0, "lease released more often than held"
        self._holds -= 1
        if self._holds == 0:
            view, self._view = self._view, None
            if view is not None:
                # BufferError: a consumer still holds this view's buffer; the segment is then
                # unmapped when it lets go (see `Segment`).
                with contextlib.suppress(BufferError):
                    view.release()
            self._pool.give_back(self.slot)


class SlotPool:
    """Slots for the requests in the server; up to `keep` idle ones stay mapped for reuse.

    There is always a slot to lend (a request reading its body has one, however slowly it
    arrives); how many requests may queue is the runner's limit, not the pool's. Slots beyond
    `keep` are unlinked when given back, and their indices collected in `forgotten` (as are
    those of slots that grew) so the worker can unmap them too; `take_forgotten` empties it.
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
        if self._free:
            slot = self._free.pop()
        else:
            slot = Slot(self._tag, next(self._indices), self.forgotten)
        self._live[slot.index] = slot
        return Lease(self, slot)

    def take_forgotten(self) -> tuple[int, ...]:
        """The indices the worker should unmap, once: the list is emptied."""
        forgotten = tuple(self.forgotten)
        self.forgotten.clear()
        return forgotten

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
    """The worker's mappings of the entrypoint's slots, refreshed when a slot's name changes.

    A mapping a policy still views (it kept an input array) is unmapped when that view goes.
    """

    def __init__(self) -> None:
        self._mapped: dict[int, Segment] = {}

    def buffer(self, index: int, name: str) -> memoryview:
        segment = self._mapped.get(index)
        if segment is None or segment.name != name:
            if segment is not None:
                segment.close()
            segment = Segment.attach(name)
            self._mapped[index] = segment
        return segment.buf

    def forget(self, index: int) -> None:
        """Unmap a slot the entrypoint has unlinked."""
        segment = self._mapped.pop(index, None)
        if segment is not None:
            segment.close()

    def close(self) -> None:
        for segment in self._mapped.values():
            segment.close()
        self._mapped.clear()

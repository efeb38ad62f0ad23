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

``/dev/shm`` is a tmpfs of bounded size (64 MiB in a Docker container unless ``--shm-size``
says otherwise). A segment's pages are therefore reserved when it is made (`Segment.create`):
a sparse one would be accepted and then fault (SIGBUS, the end of the server) at the first
write to a page the full tmpfs cannot give. Short of room, the pool first gives back its idle
slots, then refuses the request: 503 with ``Retry-After`` while other requests hold the room,
413 when the slot is bigger than the whole of ``/dev/shm`` (`SlotPool`). Idle slots follow
what recent requests needed, so a burst of large bodies does not keep its memory.

A segment is given up on many paths (a slot returned past the pool's `keep`, a slot that grows,
the pool closing), often while a view of it still lives: a request that timed out (408) is
abandoned with its body buffer still referenced from the exception's traceback, and arrays
decoded from a body view the slot. `Segment` is built so that this never leaks: its mapping is
freed when the last view goes, whenever that is, and `Lease` releases the body view it handed
out as soon as the request lets go of the slot.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import secrets
from collections import deque
from collections.abc import Callable, Mapping

import msgspec
import numpy as np

from vla_client.errors import InferenceError
from vla_client.segments import SEGMENT_PREFIX as SEGMENT_PREFIX
from vla_client.segments import SHM_DIR as SHM_DIR
from vla_client.segments import Segment as Segment
from vla_client.segments import shm_space as shm_space

log = logging.getLogger("vla_client.server.worker")

MIN_SLOT_BYTES = 1 << 20
RECENT_REQUESTS = 64
"""How many of the latest requests decide how many idle slots the pool keeps, and how big."""
SHORT_RETRY_AFTER_S = 1.0
"""The ``Retry-After`` of a 503 for shared memory that other requests hold."""
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


def slot_size(nbytes: int) -> int:
    """The segment size for `nbytes`: at least `MIN_SLOT_BYTES`, else `nbytes` rounded up to an
    eighth of its power of two (so at most 12.5% of a slot's reserved pages go unused, and a
    body a little larger than the last one usually still fits)."""
    if nbytes <= MIN_SLOT_BYTES:
        return MIN_SLOT_BYTES
    step = 1 << ((nbytes - 1).bit_length() - 3)
    return -(-nbytes // step) * step


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


def _try_create(name: str, nbytes: int) -> Segment | None:
    """A segment for `nbytes`: of `slot_size(nbytes)`, or of `nbytes` alone where only that fits
    (the rounding's slack is for reuse, and must not refuse a body that fits), or None when
    ``/dev/shm`` has room for neither."""
    size = slot_size(nbytes)
    for tried in (size, nbytes) if 0 < nbytes < size else (size,):
        try:
            return Segment.create(name, tried)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return None


def create_segment(name: str, nbytes: int) -> Segment:
    """`_try_create` for a `Slot` without a pool: `OSError` (``ENOSPC``) when there is no room."""
    segment = _try_create(name, nbytes)
    if segment is None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), SHM_DIR)
    return segment


class Slot:
    """One reusable segment, owned by the entrypoint; `name` changes when it grows.

    `used` is how many bytes at its start hold a request body (read there by a `Lease`), and
    `needed` the most the request using it has asked `reserve` for. When the segment is
    replaced, the index is added to `forgotten` (the pool's list) so the worker unmaps the old
    one at its next batch instead of keeping it until the slot is used again. `create` makes
    its segments, given a name and the bytes needed (the pool's makes room when ``/dev/shm`` is
    short).
    """

    def __init__(
        self,
        pool_tag: str,
        index: int,
        forgotten: list[int],
        create: Callable[[str, int], Segment] = create_segment,
    ) -> None:
        self._pool_tag = pool_tag
        self._forgotten = forgotten
        self._create = create
        self.index = index
        self.used = 0
        self.needed = 0
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

    @property
    def size(self) -> int:
        """The bytes of its segment (0 before `reserve`)."""
        return 0 if self._segment is None else self._segment.size

    def fits(self, nbytes: int) -> bool:
        return self._segment is not None and self._segment.size >= nbytes

    def reserve(self, nbytes: int) -> None:
        """Make sure the segment holds at least `nbytes`, replacing it with a bigger one
        (`slot_size`) if not.

        Arrays still viewing the old segment stay valid: it is unlinked at once and unmapped
        once the last view of it is gone.
        """
        self.needed = max(self.needed, nbytes)
        if self.fits(nbytes):
            return
        if self._segment is not None:
            # Past the body lies only what earlier requests left: its pages go first, so that
            # the old segment and the new one need not both fit in /dev/shm.
            self._segment.discard(self.used)
            self._forgotten.append(self.index)
        self.release()
        self._generation += 1
        name = f"{SEGMENT_PREFIX}{self._pool_tag}_{self.index}_{self._generation}"
        self._segment = self._create(name, nbytes)
        self._address = _address(np.frombuffer(self.buffer, np.uint8, count=1))
        self.used = 0

    def reset(self) -> None:
        """The request using the slot is done: forget its body and what it needed."""
        self.used = 0
        self.needed = 0

    def locate(self, array: np.ndarray) -> int | None:
        """Where `array` lies in the segment, or None when it is not wholly and plainly there."""
        if self._segment is None or not array.flags.c_contiguous:
            return None
        offset = _address(array) - self._address
        if 0 <= offset <= self._segment.size - array.nbytes and offset % array.itemsize == 0:
            return offset
        return None

    def discard(self) -> None:
        """Free the segment's pages now (`Segment.discard`): for a slot no request uses."""
        if self._segment is not None:
            self._segment.discard()

    def release(self) -> None:
        """Unlink the segment, and unmap it now or, if something still views it, when that
        view goes."""
        segment, self._segment = self._segment, None
        self.used = 0
        if segment is not None:
            segment.unlink()
            segment.close()


class AdoptedSlot(Slot):
    """A slot whose segment a client of ``ipc://`` made and owns: its frames already lie there.

    The server maps it (`SlotPool.adopt`) and never grows, discards or unlinks it: what is in
    it is the client's. A request writes only past the client's frames (`used`), where the
    client left room for the state and the chunk; what does not fit there is refused, not
    moved to another segment.
    """

    def __init__(self, segment: Segment, index: int, forgotten: list[int]) -> None:
        super().__init__("", index, forgotten)
        self._segment = segment
        self._address = _address(np.frombuffer(segment.buf, np.uint8, count=1))

    def reserve(self, nbytes: int) -> None:
        self.needed = max(self.needed, nbytes)
        if not self.fits(nbytes):
            raise InferenceError(
                400,
                f"the client's shared-memory segment holds {self.size} bytes; the request "
                f"needs {nbytes} (its frames, state and chunk)",
            )

    def reset(self) -> None:
        self.needed = 0  # `used` is the client's frames, set for each request

    def discard(self) -> None:
        """Nothing: the pages are the client's."""

    def release(self) -> None:
        """Unmap (now, or when the last view goes); the client unlinks its segment."""
        segment, self._segment = self._segment, None
        if segment is not None:
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
        traceback of a request that timed out, say) cannot keep the segment mapped. Raises
        `InferenceError` (503 or 413) when shared memory lacks the room (`SlotPool`).
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
    """Slots for the requests in the server; idle ones stay mapped for reuse, as many and as
    big as the latest `RECENT_REQUESTS` requests needed, and never more than `keep`.

    There is always a slot to lend (a request reading its body has one, however slowly it
    arrives); how many requests may queue is the runner's limit, not the pool's. Slots not
    kept are unlinked when given back, and their indices collected in `forgotten` (as are
    those of slots that grew) so the worker can unmap them too; `take_forgotten` empties it.

    A burst of large bodies therefore leaves its slots only until smaller requests have
    replaced it in the recent record: then idle slots bigger than any recent request needed,
    or more than were ever in use at once recently, are unlinked.

    When ``/dev/shm`` is too full for a new segment, the idle slots are unlinked and the
    segment tried once more; if it still does not fit, the request is refused with
    `InferenceError`: 413 when the slot is larger than the whole of ``/dev/shm`` (no retry
    can help), else 503 with ``Retry-After``. The first refusal is logged, with what
    ``/dev/shm`` holds and what this pool uses.
    """

    def __init__(self, keep: int) -> None:
        self._tag = f"{os.getpid()}_{secrets.token_hex(3)}"
        self._keep = keep
        self._indices = itertools.count()
        self._free: list[Slot] = []
        self._live: dict[int, Slot] = {}
        self._adopted: dict[int, AdoptedSlot] = {}
        self._closed = False
        self._told_short = False
        # What each of the latest requests needed, and how many slots were lent when it began.
        self._needs: deque[int] = deque(maxlen=RECENT_REQUESTS)
        self._crowds: deque[int] = deque(maxlen=RECENT_REQUESTS)
        self._crowd: dict[int, int] = {}
        self.forgotten: list[int] = []

    @property
    def in_use(self) -> int:
        """Slots held by requests now."""
        return len(self._live) - len(self._free)

    @property
    def reserved_bytes(self) -> int:
        """Bytes of shared memory the pool's segments hold now, idle slots included."""
        return sum(slot.size for slot in self._live.values())

    def lend(self) -> Lease:
        """A slot for one request, held once by the caller."""
        if self._free:
            slot = self._free.pop()
        else:
            slot = Slot(self._tag, next(self._indices), self.forgotten, self._create)
        self._live[slot.index] = slot
        self._crowd[slot.index] = self.in_use
        return Lease(self, slot)

    def adopt(self, segment: Segment) -> AdoptedSlot:
        """A slot for a client's `segment` (mapped here), kept until `let_go`: each request
        whose frames lie there borrows it with `lend_adopted`."""
        slot = AdoptedSlot(segment, next(self._indices), self.forgotten)
        self._adopted[slot.index] = slot
        return slot

    def lend_adopted(self, slot: AdoptedSlot, used: int) -> Lease:
        """A lease on `slot` for one request whose frames fill its first `used` bytes."""
        slot.used = used
        return Lease(self, slot)

    def let_go(self, slot: AdoptedSlot) -> None:
        """Unmap a client's segment (no request holds it) and tell the worker to unmap it."""
        if self._adopted.pop(slot.index, None) is not None:
            slot.release()
            self.forgotten.append(slot.index)

    def take_forgotten(self) -> tuple[int, ...]:
        """The indices the worker should unmap, once: the list is emptied."""
        forgotten = tuple(self.forgotten)
        self.forgotten.clear()
        return forgotten

    def slot(self, index: int) -> Slot:
        return self._live[index] if index in self._live else self._adopted[index]

    def give_back(self, slot: Slot) -> None:
        if isinstance(slot, AdoptedSlot):  # the client's: neither kept nor counted here
            slot.reset()
            return
        self._needs.append(slot.needed)
        self._crowds.append(self._crowd.pop(slot.index))  # recorded when it was lent
        slot.reset()
        if self._closed:
            self._drop(slot)
            return
        self._free.append(slot)
        # Idle slots: as many as were lent at once lately, none bigger than lately needed.
        largest = slot_size(max(self._needs))
        for idle in [idle for idle in self._free if idle.size > largest]:
            self._free.remove(idle)
            self._drop(idle)
        kept = min(self._keep, max(self._crowds))
        while len(self._free) > kept:
            self._drop(self._free.pop(0))  # the longest idle first

    def close(self) -> None:
        """Unlink every segment; call once the worker reads them no more.

        A request still reading its body keeps its mapping until it lets go; a slot lent or
        given back after this is unlinked as soon as it comes back.
        """
        self._closed = True
        for slot in (*self._live.values(), *self._adopted.values()):
            slot.release()
        self._live.clear()
        self._adopted.clear()
        self._free.clear()

    def _drop(self, slot: Slot) -> None:
        """Unlink `slot` for good, its pages freed now (the worker may map it until its next
        batch tells it to forget), and tell the worker to unmap it."""
        slot.discard()
        slot.release()
        self._live.pop(slot.index, None)
        self.forgotten.append(slot.index)

    def _create(self, name: str, nbytes: int) -> Segment:
        """`_try_create`, with the idle slots unlinked to make room if there is none."""
        segment = _try_create(name, nbytes)
        if segment is None and self._free:
            free, self._free = self._free, []
            for idle in free:
                self._drop(idle)
            segment = _try_create(name, nbytes)
        if segment is None:
            raise self._short(nbytes)
        return segment

    def _short(self, size: int) -> InferenceError:
        total, free = shm_space()
        mib = 1 << 20
        if not self._told_short:
            self._told_short = True
            log.warning(
                "shared memory is short: %s holds %.0f MiB (%.0f MiB free), a request needed "
                "%.1f MiB and this server process holds %.1f MiB for %d requests; give it more "
                "(docker run --shm-size, see docs/server.md, 'Shared memory') or send smaller "
                "frames. Such requests get 503 (413 when larger than %s)",
                SHM_DIR, total / mib, free / mib, size / mib,
                self.reserved_bytes / mib, self.in_use, SHM_DIR,
            )  # fmt: skip
        if size > total:
            return InferenceError(
                413,
                f"the request needs {size / mib:.1f} MiB ({size} bytes) of shared memory and "
                f"the server's {SHM_DIR} holds {total / mib:.1f} MiB ({total} bytes) in all: "
                "send smaller frames",
            )
        return InferenceError(
            503,
            f"the server is short of shared memory: the request needs {size / mib:.1f} MiB, "
            f"{free / mib:.1f} MiB of {SHM_DIR} is free",
            retry_after=SHORT_RETRY_AFTER_S,
        )


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

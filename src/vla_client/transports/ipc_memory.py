"""The ``ipc://`` client's shared memory: segments it makes, fills with frames and unlinks.

`FramePool` hands a request a segment big enough for its frames (colour and depth, each a raw
array of its own dtype), writes each frame into it once (`np.copyto`, straight from the
camera's array), and takes it back after the reply. A segment whose request got a reply is kept
for the next request (one, or a few under concurrent calls); one whose request failed or timed
out is unlinked at once, because the server's worker may still be reading it, or about to write
its chunk into it, and the next request must not share it with that. A segment's pages are
reserved when it is made (`vla_client.segments.Segment.create`), so a full ``/dev/shm`` is an
error here, never a SIGBUS later: 413 when the frames are larger than the whole of it, else 503
with ``Retry-After`` (retried as the server's own 503 would be), as the server answers for its
own shared memory.

Every segment is made by this process, named with its pid (`client_segment_name`), mode 0600,
and unlinked by it: when given back unused, when the pool closes, and, if the process is
killed outright, by its resource tracker, by the server it was talking to (which sees the
connection drop and its owner gone), or by the next pool made on this machine
(`sweep_dead_clients`).
"""

from __future__ import annotations

import errno
import secrets
import threading
from collections.abc import Mapping

import numpy as np

from vla_client.errors import ServerError
from vla_client.protocol.ipc import FrameLayout, SharedFrames
from vla_client.segments import SHM_DIR, Segment, client_segment_name, shm_space, sweep_dead_clients

HEADROOM_BYTES = 64 * 1024
"""Room past the frames for what the server puts beside them: the state, a real-time chunking
prefix and the chunk the worker writes back (a bigger chunk comes back in the reply)."""
ALIGN = 64
KEEP = 2
"""Idle segments kept for reuse (one per call in flight, up to this)."""
RETRY_AFTER_S = 1.0
_MIB = 1 << 20
_NAMES = {np.dtype(name): name for name in ("uint8", "uint16", "float32")}
"""The name of each dtype a frame may have (`np.dtype.name` is Python code, 2 us a call)."""


def plan(frames: Mapping[str, np.ndarray], start: int = 0) -> tuple[tuple[FrameLayout, ...], int]:
    """Where each frame goes in a segment from `start` on, packed and aligned, and where they
    end."""
    layouts: list[FrameLayout] = []
    offset = start
    for camera, frame in frames.items():
        dtype = _NAMES.get(frame.dtype) or frame.dtype.name
        layouts.append(FrameLayout(camera, tuple(frame.shape), offset, dtype))
        offset = -(-(offset + frame.nbytes) // ALIGN) * ALIGN
    return tuple(layouts), offset


def segment_size(nbytes: int) -> int:
    """The size of a segment for `nbytes` of frames: with `HEADROOM_BYTES`, rounded up to an
    eighth of its power of two (so a slightly bigger frame next time still fits)."""
    total = nbytes + HEADROOM_BYTES
    step = max(1 << max(total.bit_length() - 4, 12), 4096)
    return -(-total // step) * step


class FramePool:
    """Segments for one transport's requests; thread-safe (a blocking client may be shared)."""

    def __init__(self) -> None:
        sweep_dead_clients()
        self._tag = secrets.token_hex(4)
        self._count = 0
        self._idle: list[Segment] = []
        self._lock = threading.Lock()
        self._closed = False

    def write(
        self, frames: SharedFrames
    ) -> tuple[Segment, tuple[FrameLayout, ...], tuple[FrameLayout, ...]]:
        """A segment holding `frames` (each copied in once, in its own dtype) and where each
        colour frame and each depth frame lies."""
        images, end = plan(frames.images)
        depth, nbytes = plan(frames.depth, end)
        segment = self._take(nbytes)
        buffer = segment.buf
        for layout, frame in zip(
            (*images, *depth), (*frames.images.values(), *frames.depth.values()), strict=True
        ):
            target: np.ndarray = np.ndarray(layout.shape, frame.dtype, buffer, layout.offset)
            np.copyto(target, frame, casting="no")
        return segment, images, depth

    def give_back(self, segment: Segment, *, reuse: bool) -> None:
        """`segment`'s request is over: kept for the next when `reuse` (it got its reply) and
        there is room, else unlinked."""
        with self._lock:
            if reuse and not self._closed and len(self._idle) < KEEP:
                self._idle.append(segment)
                return
        _drop(segment)

    def close(self) -> None:
        """Unlink every idle segment (one still in use is unlinked when given back)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for segment in idle:
            _drop(segment)

    def _take(self, nbytes: int) -> Segment:
        with self._lock:
            for segment in self._idle:
                if segment.size >= nbytes + HEADROOM_BYTES:
                    self._idle.remove(segment)
                    return segment
            self._count += 1
            name = client_segment_name(self._tag, self._count)
        size = segment_size(nbytes)
        try:
            return Segment.create(name, size)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        return self._short(size)

    def _short(self, size: int) -> Segment:
        """Free the idle segments and try once more; else the server's refusal for it."""
        with self._lock:
            idle, self._idle = self._idle, []
        for segment in idle:
            _drop(segment)
        with self._lock:
            self._count += 1
            name = client_segment_name(self._tag, self._count)
        try:
            return Segment.create(name, size)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        total, free = shm_space()
        if size > total:
            raise ServerError(
                413,
                f"the frames need {size / _MIB:.1f} MiB ({size} bytes) of shared memory and "
                f"{SHM_DIR} holds {total / _MIB:.1f} MiB ({total} bytes) in all: send smaller "
                "frames",
            )
        raise ServerError(
            503,
            f"shared memory is short: the frames need {size / _MIB:.1f} MiB, "
            f"{free / _MIB:.1f} MiB of {SHM_DIR} is free",
            retry_after=RETRY_AFTER_S,
        )


def _drop(segment: Segment) -> None:
    segment.unlink()
    segment.close()

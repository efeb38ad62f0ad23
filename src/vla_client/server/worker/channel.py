"""Messages between entrypoint and worker: length-prefixed frames over a Unix stream socket.

A frame is a 4-byte big-endian length and that many bytes (a msgpack record from `messages`).
The records are small (a hundred bytes: the arrays stay in shared memory), so the hand-off is
a wake-up of the other process more than a transfer, and what it costs is mostly system calls.
`Channel` keeps them to one per frame each way: a frame goes out in one ``send`` with its
header, and one ``recv`` takes whatever has arrived, however many frames that is (where
`multiprocessing.connection.Connection` read each frame's header and body separately, four
reads per round trip instead of two). Frames that arrive together are returned together, and
none stays buffered after `receive` returns, so a selector on `fileno` never sleeps on one.
"""

from __future__ import annotations

import select
import socket
import struct

_HEADER = struct.Struct("!I")
_READ_BYTES = 1 << 16
MAX_FRAME_BYTES = (1 << 32) - 1


class Channel:
    """One end of a connected stream socket carrying frames (blocking sends and reads)."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        self._sock = sock
        self._received = bytearray()
        self._closed = False

    def fileno(self) -> int:
        return self._sock.fileno()

    @property
    def closed(self) -> bool:
        return self._closed

    def send(self, payload: bytes) -> None:
        """Send one frame; `OSError` (`BrokenPipeError`) when the peer has gone."""
        if len(payload) > MAX_FRAME_BYTES:
            raise ValueError(f"a frame holds at most {MAX_FRAME_BYTES} bytes")
        header = _HEADER.pack(len(payload))
        if len(payload) <= _READ_BYTES:
            self._sock.sendall(header + payload)
        else:  # the packed policy, once: no copy of megabytes to prepend four bytes
            self._sock.sendall(header)
            self._sock.sendall(payload)

    def receive(self, *, wait: bool = True) -> list[bytes]:
        """The frames that have arrived, after one read of the socket (more only when `wait`
        and no frame is complete yet). Without `wait` the read never blocks, and may find no
        complete frame (nothing yet, or part of one): then it returns none. `EOFError` once the
        peer has closed its end; `OSError` if the socket fails."""
        while True:
            try:
                data = self._sock.recv(
                    max(_READ_BYTES, self._missing()), 0 if wait else socket.MSG_DONTWAIT
                )
            except BlockingIOError:
                return []
            if not data:
                raise EOFError("the other end of the channel closed")
            self._received += data
            frames = self._complete_frames()
            if frames or not wait:
                return frames

    def poll(self, timeout_s: float) -> bool:
        """Whether a read would find data (or the end) within `timeout_s`."""
        readable, _, _ = select.select([self._sock], [], [], timeout_s)
        return bool(readable)

    def close(self) -> None:
        self._closed = True
        self._sock.close()

    def _missing(self) -> int:
        """Bytes still to come of the frame being received, as far as its header tells."""
        if len(self._received) < _HEADER.size:
            return 0
        size: int = _HEADER.unpack_from(self._received)[0]
        return _HEADER.size + size - len(self._received)

    def _complete_frames(self) -> list[bytes]:
        frames: list[bytes] = []
        received, start = self._received, 0
        while len(received) - start >= _HEADER.size:
            (size,) = _HEADER.unpack_from(received, start)
            end = start + _HEADER.size + size
            if end > len(received):
                break
            frames.append(bytes(received[start + _HEADER.size : end]))
            start = end
        if start:
            del received[:start]
        return frames

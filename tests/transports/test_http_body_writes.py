"""A request body the socket takes a piece at a time is sent whole, and never copied piece by piece.

httpcore's blocking stream sends what the socket takes and slices off the rest; a slice of bytes
is a copy, so a 2 MB body over a link whose send buffer holds 64 KB would be copied some thirty
times (tens of MB per request, on every control tick). The HTTP transport's streams
(`_BoundedStream`, under every `HTTPTransport` connection) hand httpcore a memoryview, whose
slices are views. Checked on a real socket pair with a small send buffer and a reader that takes
the bytes slowly: every byte arrives in order, and the write allocates next to nothing.
"""

from __future__ import annotations

import socket
import threading
import tracemalloc
from collections.abc import Iterator

import httpcore
import numpy as np
import pytest
from httpcore._backends.sync import SyncStream

from vla_client.transports.http import _BoundedStream

BODY_BYTES = 2_073_600  # three 360x640 RGB frames
SEND_BUFFER_BYTES = 64 * 1024


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    sender, receiver = socket.socketpair()
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SEND_BUFFER_BYTES)
    yield sender, receiver
    sender.close()
    receiver.close()


def test_a_body_sent_in_pieces_arrives_whole_without_copies(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    sender, receiver = pair
    body = np.random.default_rng(7).integers(0, 256, BODY_BYTES, dtype=np.uint8).tobytes()
    received = bytearray(len(body))  # allocated before the write is measured
    got = reads = 0

    def read() -> None:
        nonlocal got, reads
        view = memoryview(received)
        while got < len(body):
            got += receiver.recv_into(view[got : got + 16 * 1024])  # a slow reader: small reads
            reads += 1

    reader = threading.Thread(target=read)
    stream: httpcore.NetworkStream = _BoundedStream(SyncStream(sender))
    tracemalloc.start()
    try:
        reader.start()
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        stream.write(body, timeout=30)
        allocated = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
        reader.join(30)
    assert bytes(received) == body
    assert reads > len(body) // SEND_BUFFER_BYTES  # the socket really took it in pieces
    # A copy per piece would allocate the rest of the body again and again: MBs at a time.
    assert allocated < BODY_BYTES // 8, f"{allocated} bytes allocated to send {BODY_BYTES}"

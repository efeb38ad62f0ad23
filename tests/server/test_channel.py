"""`Channel`: the frames between entrypoint and worker, over a real Unix socket pair."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from vla_client.server.worker.channel import Channel


@pytest.fixture
def pair() -> Iterator[tuple[Channel, Channel]]:
    left, right = socket.socketpair()
    ends = Channel(left), Channel(right)
    yield ends
    for end in ends:
        end.close()


def test_frames_sent_together_arrive_in_one_read(pair: tuple[Channel, Channel]) -> None:
    sender, receiver = pair
    for payload in (b"first", b"", b"third" * 100):
        sender.send(payload)
    # A socket pair's send has put the bytes in the receiver's buffer: one read takes all three.
    assert receiver.receive(wait=False) == [b"first", b"", b"third" * 100]


def test_part_of_a_frame_waits_for_the_rest(pair: tuple[Channel, Channel]) -> None:
    sender, receiver = pair
    raw = socket.socket(fileno=sender.fileno())  # bytes on the wire, a frame cut in two
    try:
        raw.sendall(struct.pack("!I", 6) + b"abc")
        assert receiver.poll(1.0)
        assert receiver.receive(wait=False) == []  # nothing complete yet, and no blocking
        raw.sendall(b"def" + struct.pack("!I", 1))
        assert receiver.receive() == [b"abcdef"]
        raw.sendall(b"g")
        assert receiver.receive() == [b"g"]
    finally:
        raw.detach()


def test_a_read_without_wait_never_blocks(pair: tuple[Channel, Channel]) -> None:
    _, receiver = pair
    assert not receiver.poll(0.01)
    assert receiver.receive(wait=False) == []


def test_a_frame_of_megabytes_arrives_whole(pair: tuple[Channel, Channel]) -> None:
    sender, receiver = pair
    payload = bytes(range(256)) * 20_000  # 5 MB: more than the socket buffers hold
    thread = threading.Thread(target=sender.send, args=(payload,))
    thread.start()
    assert receiver.receive() == [payload]
    thread.join(10)


def test_the_end_of_the_peer_is_eof(pair: tuple[Channel, Channel]) -> None:
    sender, receiver = pair
    sender.send(b"last")
    sender.close()
    assert receiver.receive() == [b"last"]
    with pytest.raises(EOFError):
        receiver.receive()
    with pytest.raises(OSError):
        receiver.send(b"to nobody")

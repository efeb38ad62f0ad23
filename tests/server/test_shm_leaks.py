"""Shared-memory slots on every abandoned path: nothing stays mapped, open or on /dev/shm.

The server is the default worker layout (`create_app` with its own `WorkerRunner`) in this
process, so its file descriptors are this process's. Each fault is sent by raw-socket clients,
more of them at once than the pool keeps idle slots, so slots are unlinked as well as reused.
After each fault: no descriptor (here or in the worker) points at a deleted segment, no more
segments are mapped or on /dev/shm than the pool keeps, and a good request still succeeds.
Stalled (408) and abandoned bodies used to leave a descriptor, and the memory behind it, for
every slot past the ones kept.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import msgpack
import numpy as np
import pytest
from worker_doubles import FaultyPolicy

from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.protocol import encode_request
from vla_client.server import LocalServer, ServerConfig, create_app
from vla_client.server.config import WorkerSettings
from vla_client.server.worker import SEGMENT_PREFIX

GENERATIONS = "/v1/actions/generations"
KEEP = 4  # idle slots the pool keeps (its queue size)
CLIENTS = 2 * KEEP
BODY_TIMEOUT_S = 1.0
DECLARED = 8 * 1024 * 1024


def good_body(task: str = "go") -> bytes:
    observation = Observation(images=synthetic_frames(2, 48, 64), task=task)
    return encode_request(observation, encoding="raw", wire="msgpack")[0]


class Server:
    """The server under test and what it maps: its pool's segments are the new ones."""

    def __init__(self, local: LocalServer, baseline: set[str]) -> None:
        self.local = local
        self.baseline = baseline

    def segments(self) -> set[str]:
        """Our pool's segments on /dev/shm."""
        return {n for n in _shm_names() if n not in self.baseline}

    def mapped(self, pid: int | str = "self") -> list[str]:
        """What `pid`'s descriptors on our pool's segments point at."""
        found = []
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:  # closed meanwhile
                continue
            name = target.removeprefix("/dev/shm/").removesuffix(" (deleted)")
            if target.startswith(f"/dev/shm/{SEGMENT_PREFIX}") and name not in self.baseline:
                found.append(target)
        return found

    def worker_pid(self) -> int:
        for child in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
            for pid in child.read_text().split():
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                if b"vla_client.server.worker" in cmdline:
                    return int(pid)
        raise AssertionError("no inference worker under this process")

    def raw(self, head: bytes, body: bytes = b"", *, close: bool = False) -> bytes:
        """Send a request head and (part of) a body; read the reply unless `close`."""
        with socket.create_connection((self.local.host, self.local.port), timeout=10) as sock:
            sock.sendall(head + body)
            if close:
                time.sleep(0.2)  # the server is reading the body when the client goes
                return b""
            reply = b""
            try:
                while chunk := sock.recv(65536):
                    reply += chunk
            except OSError:
                pass
            return reply.split(b"\r\n", 1)[0]

    def assert_clean(self) -> None:
        """Nothing leaked, and the server still serves (which also tells the worker to unmap
        slots the entrypoint gave up)."""
        deadline = time.monotonic() + 5  # the server finishes the abandoned requests
        while True:
            mapped = self.mapped()
            deleted = [t for t in mapped if t.endswith("(deleted)")]
            if not deleted and len(set(mapped)) <= KEEP and len(self.segments()) <= KEEP:
                break
            assert time.monotonic() < deadline, (deleted, mapped, self.segments())
            time.sleep(0.05)
        reply = httpx.post(
            self.local.url + GENERATIONS,
            content=good_body(),
            headers={"content-type": "application/msgpack"},
            timeout=30,
        )
        assert reply.status_code == 200, reply.text
        worker = [t for t in self.mapped(self.worker_pid()) if t.endswith("(deleted)")]
        assert worker == [], "the worker still maps slots the entrypoint unlinked"


def _shm_names() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith(f"{SEGMENT_PREFIX}{os.getpid()}_")}


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    baseline = _shm_names()
    config = ServerConfig(
        body_timeout_s=BODY_TIMEOUT_S,
        max_body_bytes=16 * 1024 * 1024,
        worker=WorkerSettings(queue_size=KEEP, max_batch=2),
    )
    with LocalServer(create_app(FaultyPolicy(), config)) as local:
        yield Server(local, baseline)
    assert _shm_names() <= baseline, "the pool left segments on /dev/shm"


def head(length: int, content_type: str = "application/msgpack") -> bytes:
    return (
        f"POST {GENERATIONS} HTTP/1.1\r\nhost: x\r\ncontent-type: {content_type}\r\n"
        f"content-length: {length}\r\nconnection: close\r\n\r\n"
    ).encode()


def at_once(call: Callable[[], bytes], count: int = CLIENTS) -> list[bytes]:
    replies: list[bytes] = []
    threads = [threading.Thread(target=lambda: replies.append(call())) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(replies) == count, "a client never finished"
    return replies


def test_a_body_that_stalls_gets_408_and_its_slot_back(server: Server) -> None:
    server.assert_clean()  # the pool is warm: its slots exist before the faults
    for _ in range(3):  # each round used to leave CLIENTS - KEEP descriptors behind
        replies = at_once(lambda: server.raw(head(DECLARED), b"\0" * (DECLARED // 2)))
        assert set(replies) == {b"HTTP/1.1 408 Request Timeout"}
        server.assert_clean()


def test_a_client_that_leaves_mid_body_gives_its_slot_back(server: Server) -> None:
    at_once(lambda: server.raw(head(DECLARED), b"\0" * (DECLARED // 4), close=True))
    server.assert_clean()


def test_a_body_over_the_limit_is_413_and_takes_no_segment(server: Server) -> None:
    replies = at_once(lambda: server.raw(head(64 * 1024 * 1024), b"\0" * 1024))
    assert set(replies) == {b"HTTP/1.1 413 Request Entity Too Large"}
    server.assert_clean()


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\xc1" * 65536, id="not-msgpack"),
        pytest.param(msgpack.packb({"input": {"observation": 7}}), id="not-a-request"),
        pytest.param(
            # Decodes in place (the array views the slot), then fails: a float64 image.
            encode_request(
                Observation(images={"cam": np.zeros((32, 32, 3), np.uint8)}),
                encoding="raw",
                wire="msgpack",
            )[0].replace(b"|u1", b"<f8"),
            id="bad-array",
        ),
    ],
)
def test_a_body_that_does_not_decode_is_400_and_gives_its_slot_back(
    server: Server, payload: bytes
) -> None:
    replies = at_once(lambda: server.raw(head(len(payload)), payload))
    assert set(replies) == {b"HTTP/1.1 400 Bad Request"}, replies
    server.assert_clean()


def test_clients_that_leave_while_their_requests_run_give_their_slots_back(
    server: Server,
) -> None:
    payload = good_body("sleep:0.3")
    at_once(lambda: server.raw(head(len(payload)), payload, close=True))
    time.sleep(0.3 * CLIENTS / 2)  # the worker runs them two at a time, then they all let go
    server.assert_clean()


def test_requests_refused_as_busy_give_their_slots_back(server: Server) -> None:
    payload = good_body("sleep:0.2")
    replies = at_once(lambda: server.raw(head(len(payload)), payload))
    assert b"HTTP/1.1 503 Service Unavailable" in replies and b"HTTP/1.1 200 OK" in replies
    server.assert_clean()

"""The server in a container's 64 MiB of ``/dev/shm``: refusals, never SIGBUS.

Each test starts ``vla-client serve`` (the default worker layout) in a private mount namespace
with a 64 MiB tmpfs over ``/dev/shm`` (`small_shm`), as Docker gives a container unless told
``--shm-size``. Before segments had their pages reserved, a request whose frames did not fit in
what was left made the server write past the tmpfs's end and die of SIGBUS.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from serve_process import wait_until_healthy
from small_shm import in_small_shm, require_small_shm, shm_used

import vla_client
from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.protocol import GENERATIONS_PATH, encode_request

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from load_test import free_port

MIB = 1 << 20
SIDE = 4096  # a 4096x4096 RGB frame decodes to 48 MiB


def frames_body(cameras: int) -> tuple[bytes, str]:
    """A msgpack request of `cameras` flat 4096x4096 PNGs: a few KB that decode to 48 MiB each."""
    frame = np.full((SIDE, SIDE, 3), 90, np.uint8)
    images = {f"cam{i}": frame for i in range(cameras)}
    return encode_request(Observation(images=images), encoding="png", wire="msgpack")


@pytest.fixture
def server() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``vla-client serve`` in a 64 MiB /dev/shm of its own; its URL and process."""
    require_small_shm()
    port = free_port()
    source = str(Path(vla_client.__file__).resolve().parents[1])
    command = [sys.executable, "-m", "vla_client.cli", "serve", "--port", str(port)]
    process = subprocess.Popen(
        in_small_shm("64m", command),
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")]),
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until_healthy(port, process)
        yield f"http://127.0.0.1:{port}", process
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(30)


def stderr_of(process: subprocess.Popen[bytes]) -> str:
    process.terminate()
    assert process.stderr is not None
    return process.communicate(timeout=30)[1].decode()


def test_frames_that_do_not_fit_beside_a_held_body_get_503_and_the_server_lives(
    server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, process = server
    # A body of 40 MB, 39 MB of it sent: its slot holds 40 MiB of the 64 while it waits.
    held = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])))
    head = (
        f"POST {GENERATIONS_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/msgpack\r\n"
        f"Content-Length: {40_000_000}\r\n\r\n"
    )
    held.sendall(head.encode() + bytes(39_000_000))
    deadline = time.monotonic() + 30
    while shm_used(process.pid) < 39_000_000:  # the server has read what was sent
        assert time.monotonic() < deadline, "the held body never reached shared memory"
        time.sleep(0.05)
    body, content_type = frames_body(1)
    headers = {"content-type": content_type}
    try:
        for _ in range(2):  # refused each time, said once in the log
            reply = httpx.post(url + GENERATIONS_PATH, content=body, headers=headers, timeout=60)
            assert reply.status_code == 503, reply.text
            assert float(reply.headers["retry-after"]) > 0
            assert "short of shared memory" in reply.json()["detail"]
    finally:
        held.close()
    # The held body gone, the same request fits.
    reply = httpx.post(url + GENERATIONS_PATH, content=body, headers=headers, timeout=60)
    assert reply.status_code == 200, reply.text
    assert process.poll() is None
    log = stderr_of(process)
    assert log.count("shared memory is short") == 1, log[-3000:]
    assert "--shm-size" in log


def test_frames_larger_than_the_whole_of_dev_shm_get_413(
    server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, process = server
    body, content_type = frames_body(2)  # 96 MiB decoded: never fits in 64
    reply = httpx.post(
        url + GENERATIONS_PATH, content=body, headers={"content-type": content_type}, timeout=60
    )
    assert reply.status_code == 413, reply.text
    assert "holds 64.0 MiB (67108864 bytes) in all" in reply.json()["detail"]
    assert "retry-after" not in reply.headers
    small, kind = encode_request(Observation(images=synthetic_frames(1, 32, 32)), wire="msgpack")
    reply = httpx.post(url + GENERATIONS_PATH, content=small, headers={"content-type": kind})
    assert reply.status_code == 200, reply.text
    assert shm_used(process.pid) < 8 * MIB, "the refused request left its memory behind"


def test_two_requests_of_48_mib_at_once_are_served_or_refused_never_a_crash(
    server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, process = server
    body, content_type = frames_body(1)

    def post() -> httpx.Response:
        return httpx.post(
            url + GENERATIONS_PATH, content=body, headers={"content-type": content_type}, timeout=60
        )

    for _ in range(2):
        with ThreadPoolExecutor(2) as pool:
            replies = list(pool.map(lambda _: post(), range(2)))
        for reply in replies:
            assert reply.status_code in (200, 503), reply.text
            if reply.status_code == 503:
                assert "retry-after" in reply.headers
        assert process.poll() is None
    assert post().status_code == 200


def test_a_burst_of_large_bodies_gives_its_memory_back_once_requests_are_small(
    server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, process = server
    port = int(url.rsplit(":", 1)[1])
    big, content_type = encode_request(
        Observation(images={"top": np.full((1000, 2000, 3), 7, np.uint8)}),
        encoding="raw",
        wire="msgpack",
    )  # 6 MB
    head = (
        f"POST {GENERATIONS_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(big)}\r\nConnection: close\r\n\r\n"
    ).encode()
    # Eight at once, for sure: each holds its slot with all but its last byte sent.
    burst = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
    for connection in burst:
        connection.sendall(head + big[:-1])
    deadline = time.monotonic() + 30
    while shm_used(process.pid) < 8 * len(big):
        assert time.monotonic() < deadline, "the burst never held eight slots"
        time.sleep(0.05)
    for connection in burst:
        connection.sendall(big[-1:])
        assert b" 200 " in connection.recv(64)
        connection.close()
    small, kind = encode_request(Observation(images=synthetic_frames(1, 32, 32)), wire="msgpack")
    with httpx.Client(base_url=url) as client:
        for _ in range(70):
            reply = client.post(GENERATIONS_PATH, content=small, headers={"content-type": kind})
            assert reply.status_code == 200
    assert shm_used(process.pid) <= 2 * MIB, "idle slots kept the burst's memory"

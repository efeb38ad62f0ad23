"""Faults through the real HTTP server: each gets a clear status and the server keeps serving.

One server runs `FaultyPolicy` in a worker process; the task text picks the fault.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from serve_process import start_serve
from worker_doubles import FaultyPolicy

from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.protocol import encode_request
from vla_client.server import LocalServer, ServerConfig, create_app
from vla_client.server.config import WorkerSettings
from vla_client.server.worker import SEGMENT_PREFIX, WorkerRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import load_test

GENERATIONS = "/v1/actions/generations"
QUEUE_SIZE = 3


def body(task: str, cameras: int = 2) -> bytes:
    frames = synthetic_frames(cameras, 24, 32)
    return encode_request(Observation(images=frames, task=task), encoding="raw", wire="msgpack")[0]


def post(url: str, task: str, timeout: float = 30.0) -> httpx.Response:
    return httpx.post(
        url + GENERATIONS,
        content=body(task),
        headers={"content-type": "application/msgpack"},
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, WorkerRunner]]:
    settings = WorkerSettings(max_batch=1, queue_size=QUEUE_SIZE, inference_timeout_s=1.5)
    runner = WorkerRunner(FaultyPolicy(), settings)
    before = pid_segments()
    with LocalServer(create_app(FaultyPolicy(), ServerConfig(), runner=runner)) as server:
        yield server.url, runner
    assert pid_segments() <= before, "the runner left shared-memory segments behind"


def pid_segments() -> set[str]:
    # Servers that other tests keep for the whole session share this pid; compare, don't count.
    return {n for n in os.listdir("/dev/shm") if n.startswith(f"{SEGMENT_PREFIX}{os.getpid()}_")}


def assert_serving(url: str, runner: WorkerRunner) -> None:
    reply = post(url, "fine")
    assert reply.status_code == 200, reply.text
    assert runner._pool.in_use == 0, "every slot should be back in the pool"


def test_policy_that_raises_gets_500_and_the_worker_lives(served: tuple[str, WorkerRunner]) -> None:
    url, runner = served
    pid = runner.worker_pid
    reply = post(url, "raise")
    assert reply.status_code == 500
    assert reply.json()["detail"] == "policy failed (RuntimeError); details are in the server log"
    assert_serving(url, runner)
    assert runner.worker_pid == pid


def test_worker_crash_gets_503_and_a_new_worker(served: tuple[str, WorkerRunner]) -> None:
    url, runner = served
    pid = runner.worker_pid
    reply = post(url, "crash")
    assert reply.status_code == 503
    assert "worker exited (code 3)" in reply.json()["detail"]
    assert reply.headers["retry-after"] == "1"
    assert_serving(url, runner)
    assert runner.worker_pid not in (None, pid)


def test_worker_killed_from_outside_is_replaced(served: tuple[str, WorkerRunner]) -> None:
    url, runner = served
    pid = runner.worker_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while runner.worker_pid in (None, pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    replacement = runner.worker_pid
    assert replacement not in (None, pid), "no new worker within 20 s"
    assert_serving(url, runner)
    assert runner.worker_pid == replacement, "the new worker serves; it is not replaced again"


def test_stuck_inference_is_stopped_with_504(served: tuple[str, WorkerRunner]) -> None:
    url, runner = served
    reply = post(url, "sleep:30")
    assert reply.status_code == 504
    assert "longer than 1.5 s" in reply.json()["detail"]
    assert_serving(url, runner)


def test_full_queue_answers_503_with_retry_after(served: tuple[str, WorkerRunner]) -> None:
    url, runner = served
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda _: post(url, "sleep:0.3"), range(8)))
    statuses = sorted(reply.status_code for reply in replies)
    assert 200 in statuses and 503 in statuses
    busy = [reply for reply in replies if reply.status_code == 503]
    assert all(r.headers["retry-after"] == "1" and "busy" in r.json()["detail"] for r in busy)
    assert_serving(url, runner)


def test_too_many_cameras_is_413(served: tuple[str, WorkerRunner]) -> None:
    url, runner = served
    reply = httpx.post(
        url + GENERATIONS,
        content=body("fine", cameras=17),
        headers={"content-type": "application/msgpack"},
    )
    assert reply.status_code == 413
    assert "17 cameras" in reply.json()["detail"]
    assert_serving(url, runner)


def test_client_that_disconnects_mid_request_loses_nothing(
    served: tuple[str, WorkerRunner],
) -> None:
    url, runner = served
    host, port = url.removeprefix("http://").split(":")
    payload = body("sleep:0.4")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            f"POST {GENERATIONS} HTTP/1.1\r\nhost: x\r\ncontent-type: application/msgpack\r\n"
            f"content-length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        time.sleep(0.1)
    time.sleep(0.6)
    assert_serving(url, runner)


@pytest.mark.parametrize("api_servers", ["1", "2"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_with_requests_in_flight_stops_cleanly(signum: int, api_servers: str) -> None:
    port = load_test.free_port()
    server = start_serve(port, "--queue-size", "4", "--api-servers", api_servers)
    url = f"http://127.0.0.1:{port}"
    try:
        processes = load_test.process_tree(server.pid)  # entrypoints make the segments
        statuses: list[int | str] = []
        stop = threading.Event()

        def client() -> None:
            while not stop.is_set():
                try:
                    statuses.append(post(url, "go", timeout=10).status_code)
                except httpx.TransportError as exc:
                    statuses.append(type(exc).__name__)
                    return

        threads = [threading.Thread(target=client) for _ in range(4)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        server.send_signal(signum)
        # uvicorn re-raises the signal after its graceful shutdown, so the status names it.
        assert server.wait(20) in (0, -signum)
        stop.set()
        for thread in threads:
            thread.join(15)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert 200 in statuses
    assert set(statuses) <= {200, 503, "ConnectError", "RemoteProtocolError", "ReadError"}
    assert load_test.leaked_segments(processes, wait_s=0) == []
    errors = server.stderr.read().decode() if server.stderr else ""
    assert "Traceback" not in errors
    assert "leaked" not in errors, "the resource tracker had to clean up after the server"
    assert "Finished server process" in errors

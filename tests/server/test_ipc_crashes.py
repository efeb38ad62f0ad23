"""``ipc://`` when a side is killed outright (SIGKILL) at a random moment: no shared-memory
segment of the dead process is left in /dev/shm once the survivor (or the next start) has
cleaned up, and the other clients go on. Only the segments of this test's own processes are
counted: other test runs share the machine."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from serve_process import start_serve

from vla_client import ActionClient, Observation
from vla_client.errors import ConnectError
from vla_client.segments import SEGMENT_PREFIX
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.transports import NO_RETRY
from vla_client.transports.ipc_memory import FramePool

LOOP = Path(__file__).with_name("ipc_client_loop.py")
SOURCE = str(Path(__file__).resolve().parents[2] / "src")


def segments_of(pid: int, *, client: bool) -> set[str]:
    """`pid`'s segments in /dev/shm: a client's (``vlac_c<ns>_<pid>_...``) or a server's
    (``vlac_<pid>_...``)."""
    names = set()
    for name in os.listdir("/dev/shm"):
        if not name.startswith(SEGMENT_PREFIX):
            continue
        parts = name[len(SEGMENT_PREFIX) :].split("_")
        owner = parts[1] if client and parts[0].startswith("c") else parts[0]
        if (parts[0].startswith("c") == client) and owner == str(pid):
            names.add(name)
    return names


def settled(pid: int, *, client: bool, within_s: float = 10.0) -> set[str]:
    """`segments_of` once empty, or what is left after `within_s`."""
    deadline = time.monotonic() + within_s
    while (left := segments_of(pid, client=client)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def child_env() -> dict[str, str]:
    """The environment of a child that imports this checkout's `vla_client`."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([SOURCE, os.environ.get("PYTHONPATH", "")])}


def frames() -> Observation:
    return Observation({n: np.zeros((360, 640, 3), np.uint8) for n in "abc"}, task="other")


def test_clients_killed_at_random_moments_leave_nothing_and_disturb_no_one(tmp_path):
    path = str(tmp_path / "s.sock")
    config = ServerConfig(port=0, ipc_path=path)
    chooser = random.Random()
    with (
        LocalServer(create_app(ReferencePolicy(), config)),
        ActionClient(f"ipc://{path}") as other,
    ):
        for attempt in range(4):
            child = subprocess.Popen(
                [sys.executable, str(LOOP), path], stdout=subprocess.PIPE, env=child_env()
            )
            if attempt % 2 == 0:  # mid-loop, at some point of some request
                assert child.stdout is not None and child.stdout.readline() == b"ready\n"
                time.sleep(chooser.uniform(0, 0.05))
            else:  # anywhere from import to the first requests
                time.sleep(chooser.uniform(0.2, 2.0))
            child.send_signal(signal.SIGKILL)
            child.wait(10)
            assert settled(child.pid, client=True) == set()
            assert other.infer(frames()).actions.shape == (16, 7)  # undisturbed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_server_killed_mid_request_leaves_nothing_and_a_restart_serves(tmp_path):
    path = str(tmp_path / "s.sock")
    port = free_port()
    server = start_serve(port, "--ipc", path)
    errors: list[BaseException] = []
    stop = threading.Event()
    client = ActionClient(f"ipc://{path}", timeout_s=10, retry=NO_RETRY)

    def loop() -> None:
        while not stop.is_set():
            try:
                client.infer(frames())
            except Exception as exc:  # which kind it is, is what the test checks
                errors.append(exc)
                time.sleep(0.01)

    robot = threading.Thread(target=loop)
    try:
        client.infer(frames())
        with ActionClient(f"http://127.0.0.1:{port}", encoding="raw", wire="msgpack") as http:
            http.infer(frames())  # a slot of the server's own, for its cleanup to be seen
        assert segments_of(server.pid, client=False)
        robot.start()
        time.sleep(random.uniform(0.05, 0.5))
        os.kill(server.pid, signal.SIGKILL)
        server.wait(10)
        assert settled(server.pid, client=False) == set()
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            time.sleep(0.05)
        assert errors, "the robot's calls after the server died should fail"
        assert all(isinstance(error, ConnectError) for error in errors), errors
        server = start_serve(port, "--ipc", path)  # its stale socket is replaced
        stop.set()
        robot.join(30)
        assert client.infer(frames()).actions.shape == (16, 7)
    finally:
        stop.set()
        client.close()
        server.kill()
        server.wait(10)
    assert segments_of(os.getpid(), client=True) == set()


def test_the_next_client_sweeps_what_a_dead_one_left():
    """A client killed before any server saw its segment (and whose resource tracker died with
    it): the next client's pool unlinks it."""
    code = (
        "import os, sys; from vla_client.segments import Segment, client_segment_name;"
        "s = Segment.create(client_segment_name('dead', 1), 4096);"
        "from multiprocessing import resource_tracker;"
        "resource_tracker.unregister('/' + s.name, 'shared_memory');"  # as if the tracker died
        "print(s.name, flush=True); os.kill(os.getpid(), 9)"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, env=child_env(), check=False
    )
    name = child.stdout.decode().strip()
    assert child.returncode == -signal.SIGKILL and name in os.listdir("/dev/shm")
    FramePool().close()
    assert name not in os.listdir("/dev/shm")

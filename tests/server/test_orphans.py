"""``vla-client serve`` killed outright (SIGKILL): nothing of it keeps running, the port or the key.

Its children end on their own (the kernel signals them when their parent dies), the resource
tracker unlinks what is left and exits, and the API key, which reaches the entrypoints over
the pipe they are started with, is in no file and in no child's environment.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import httpx
import pytest
from serve_process import start_serve

from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.protocol import encode_request
from vla_client.server.api_servers import remove_stale_folders
from vla_client.server.local import bind_listener

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import load_test

GENERATIONS = "/v1/actions/generations"


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for its new parent to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def survivors(pids: Iterable[int], wait_s: float) -> list[int]:
    deadline = time.monotonic() + wait_s
    while (left := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def files_holding(secret: bytes, folder: Path, since: float) -> list[Path]:
    """Files under `folder` changed since `since` whose bytes contain `secret`."""
    found = []
    for root, _, names in os.walk(folder, onerror=lambda error: None):
        for name in names:
            path = Path(root, name)
            try:
                info = path.stat()
                recent = path.is_file() and info.st_mtime >= since - 1 and info.st_size < 64 << 20
                if recent and secret in path.read_bytes():
                    found.append(path)
            except OSError:  # gone meanwhile, or not ours to read
                continue
    return found


@pytest.mark.parametrize("api_servers", ["1", "2"])
def test_sigkill_of_serve_leaves_no_process_no_port_and_no_key(api_servers: str) -> None:
    key = f"orphan-test-{secrets.token_hex(16)}"
    port = load_test.free_port()
    started = time.time()
    server = start_serve(port, "--api-servers", api_servers, "--api-key", key)
    url = f"http://127.0.0.1:{port}"
    try:
        body, content_type = encode_request(
            Observation(images=synthetic_frames(1, 32, 32)), encoding="raw", wire="msgpack"
        )
        headers = {"content-type": content_type, "authorization": f"Bearer {key}"}
        for _ in range(4):  # every entrypoint gets to make its segments
            assert httpx.post(url + GENERATIONS, content=body, headers=headers).status_code == 200
        children = load_test.process_tree(server.pid)[1:]
        assert len(children) >= (4 if api_servers == "2" else 2), children
        for child in children:  # the key reached the entrypoints without their environment
            assert key.encode() not in Path(f"/proc/{child}/environ").read_bytes()
            assert key.encode() not in Path(f"/proc/{child}/cmdline").read_bytes()
        os.kill(server.pid, signal.SIGKILL)
        server.wait(10)
        assert survivors(children, wait_s=20) == [], "children outlived their parent"
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    with bind_listener("127.0.0.1", port) as sock:  # a restart can take the port
        sock.listen()
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/health", timeout=1)
    assert load_test.leaked_segments(children, wait_s=5) == []
    assert files_holding(key.encode(), Path(tempfile.gettempdir()), started) == []


def test_sigkill_of_serve_under_load_ends_every_child_within_seconds() -> None:
    # Robots keep sending while `serve --api-servers 2` is killed. The entrypoints' worker
    # dies with the server and nobody restarts it: their requests used to wait the link's
    # 10 s for it, and the entrypoints (and the resource tracker) outlived the server.
    port = load_test.free_port()
    server = start_serve(port, "--api-servers", "2")
    url = f"http://127.0.0.1:{port}{GENERATIONS}"
    body, content_type = encode_request(
        Observation(images=synthetic_frames(1, 96, 128)), encoding="raw", wire="msgpack"
    )
    sending = threading.Event()
    sending.set()

    def robot() -> None:
        with httpx.Client(headers={"content-type": content_type}, timeout=30) as client:
            while sending.is_set():
                try:
                    client.post(url, content=body)
                except httpx.TransportError:
                    time.sleep(0.05)  # refused once the entrypoints stop listening

    robots = [threading.Thread(target=robot) for _ in range(4)]
    try:
        for thread in robots:
            thread.start()
        time.sleep(1.0)
        children = load_test.process_tree(server.pid)[1:]
        assert len(children) >= 4, children  # worker, tracker, two entrypoints
        os.kill(server.pid, signal.SIGKILL)
        server.wait(10)
        # 8 s: under the link's 10 s wait, which the bug was, with room for a loaded machine
        # (four processes ending on two busy cores took more than 6 s)
        assert survivors(children, wait_s=8) == [], "children outlived the server"
    finally:
        sending.clear()
        for thread in robots:
            thread.join(30)
        if server.poll() is None:
            server.kill()
            server.wait()
    assert load_test.leaked_segments(children, wait_s=5) == []


# A parent that starts a child, which asks to end with it, then both wait.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
print(child.pid, flush=True)
time.sleep(60)
"""
CHILD = """
import os, signal, sys, time
parent = os.getppid()  # before the imports, which take a while
from vla_client.server.engine import lifeline
if sys.argv[1] == "thread":  # the path where prctl is missing: a thread watches the parent
    lifeline._set_parent_death_signal = lambda signum: False
lifeline.end_with_parent(parent, signal.SIGTERM)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("how", ["prctl", "thread"])
def test_a_child_ends_when_its_parent_is_killed(how: str) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD, how], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert parent.stdout.readline().strip() == "ready"  # the child has asked
        assert alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        assert survivors([child], wait_s=5) == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


SERVER_WITH_A_LONG_CALL = """
import sys, threading, time
import httpx
sys.path.insert(0, sys.argv[1])
from worker_doubles import FaultyPolicy
from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.protocol import encode_request
from vla_client.server import LocalServer, ServerConfig, create_app
from vla_client.server.config import WorkerSettings
config = ServerConfig(worker=WorkerSettings(inference_timeout_s=120))
server = LocalServer(create_app(FaultyPolicy(), config)).start()
body, kind = encode_request(Observation(images=synthetic_frames(1, 16, 16), task="sleep:60"),
                            encoding="raw", wire="msgpack")
post = lambda: httpx.post(server.url + "/v1/actions/generations", content=body,
                          headers={"content-type": kind}, timeout=120)
threading.Thread(target=post, daemon=True).start()
time.sleep(1.0)  # the worker is inside the policy call now
print("ready", flush=True)
time.sleep(120)
"""


def test_a_worker_inside_a_long_policy_call_ends_with_its_server() -> None:
    here = str(Path(__file__).resolve().parent)
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER_WITH_A_LONG_CALL, here], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "ready"
        workers = [
            pid
            for pid in load_test.process_tree(server.pid)[1:]
            if b"vla_client.server.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        assert len(workers) == 1
        os.kill(server.pid, signal.SIGKILL)
        server.wait(10)
        # Without the parent-death signal it would finish its 60 s call first.
        assert survivors(workers, wait_s=5) == []
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    return ended.pid


def test_stale_folders_of_dead_servers_are_removed_and_nothing_else(tmp_path: Path) -> None:
    dead = _dead_pid()
    stale = tmp_path / f"vla-client-{dead}-abc"
    (stale / "sub").mkdir(parents=True)
    (stale / "worker.sock").write_text("")
    target = tmp_path / "kept-target"
    target.mkdir()
    kept = [
        tmp_path / f"vla-client-{os.getpid()}-live",  # its process runs
        tmp_path / f"vla-client-{dead}",  # not the name of a private folder
        tmp_path / f"vla-client-x{dead}-abc",
        tmp_path / f"other-{dead}-abc",
    ]
    for folder in kept:
        folder.mkdir()
    link = tmp_path / f"vla-client-{dead}-link"  # a link, even to a folder of ours
    link.symlink_to(target)
    kept += [link, target]
    if os.getuid() == 0:  # root can make a folder another user owns
        theirs = tmp_path / f"vla-client-{dead}-theirs"
        theirs.mkdir()
        os.chown(theirs, 54321, -1)
        kept.append(theirs)
    assert remove_stale_folders(str(tmp_path)) == [str(stale)]
    assert not stale.exists()
    assert [path for path in kept if not path.exists()] == []


def test_a_later_start_removes_the_folder_of_a_server_killed_outright(runtime_dir: Path) -> None:
    """``kill -9`` of ``serve --api-servers 2`` leaves its private folder with the worker's
    socket; the next ``serve`` removes it. Both run in the test's own temporary folder: a
    server started meanwhile elsewhere on the machine would remove it first."""
    port = load_test.free_port()
    server = start_serve(port, "--api-servers", "2", runtime_dir=runtime_dir)
    pattern = f"vla-client-{server.pid}-*"
    try:
        (left,) = runtime_dir.glob(pattern)
        children = load_test.process_tree(server.pid)[1:]
        os.kill(server.pid, signal.SIGKILL)
        server.wait(10)
        assert survivors(children, wait_s=20) == []
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert (left / "worker.sock").exists()  # what kill -9 leaves
    later = start_serve(load_test.free_port(), runtime_dir=runtime_dir)
    try:
        assert not left.exists()
    finally:
        later.send_signal(signal.SIGTERM)
        later.wait(30)

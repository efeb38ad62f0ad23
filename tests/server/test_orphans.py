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
import time
from collections.abc import Iterable
from pathlib import Path

import httpx
import pytest

from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.protocol import encode_request
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
    server = subprocess.Popen(
        [sys.executable, "-m", "vla_client.cli", "serve", "--port", str(port),
         "--api-servers", api_servers, "--api-key", key],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline and server.poll() is None, "server did not start"
            time.sleep(0.1)
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

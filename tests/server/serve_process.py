"""``vla-client serve`` as a subprocess, as an operator runs it, for the signal and kill tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx

import vla_client


def start_serve(
    port: int,
    *args: str,
    timeout_s: float = 60.0,
    stdout: IO[bytes] | int = subprocess.DEVNULL,
    runtime_dir: Path | None = None,
) -> subprocess.Popen[bytes]:
    """``vla-client serve --port PORT ARGS``, once ``/health`` answers; stderr is piped, stdout
    (where uvicorn writes its access log) goes to `stdout`. `runtime_dir` is its temporary
    folder (``TMPDIR``): where it keeps its private folder, and where its start removes those
    that servers killed outright left (the ``runtime_dir`` fixture gives a test its own).

    It runs the `vla_client` this test imported, wherever that is.
    """
    source = str(Path(vla_client.__file__).resolve().parents[1])
    path = os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    if runtime_dir is not None:
        env["TMPDIR"] = str(runtime_dir)
    server = subprocess.Popen(
        [sys.executable, "-m", "vla_client.cli", "serve", "--port", str(port), *args],
        env=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
    )
    wait_until_healthy(port, server, timeout_s)
    return server


def wait_until_healthy(port: int, server: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    """Return once the server on `port` answers ``/health`` with 200; kill it and raise
    `AssertionError` with its stderr if it exits or takes over `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.kill()
            errors = server.communicate()[1].decode()
            raise AssertionError(f"vla-client serve did not start: {errors[-2000:]}")
        time.sleep(0.1)

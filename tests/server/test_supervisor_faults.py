"""A worker that fails to start, or drops its connection, is a start error the server can
report and retry, never an exception of its own that hides or ends it.

Reaping waits a bounded time, kills, and waits again; on a loaded machine that second wait
could time out too, and its `subprocess.TimeoutExpired`, raised while the start error was being
handled, replaced it: the user saw a timeout of the reaper instead of the policy's own error.
The process here is real (a worker that fails in ``load``); only its `wait` is made to time out,
as it does when the machine is too busy to reap in time.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from my_policies import Lifecycle
from worker_doubles import SlowToReap

from vla_client.errors import PolicyStartError, WorkerStartError
from vla_client.server.worker import supervisor
from vla_client.server.worker.supervisor import WorkerLink, WorkerProcess


def test_the_start_error_survives_a_reap_that_times_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[SlowToReap] = []

    def popen(*args: Any, **kwargs: Any) -> SlowToReap:
        started.append(SlowToReap(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(supervisor.subprocess, "Popen", popen)
    monkeypatch.setattr(SlowToReap, "timeouts", 0)  # counted afresh when the test runs again
    policy = Lifecycle(str(tmp_path / "log"), fail="load")
    worker = WorkerProcess(policy, max_batch=1, on_message=lambda _: None, on_exit=lambda _: None)
    try:
        with pytest.raises(PolicyStartError, match=r"no checkpoint at /models/secret\.ckpt"):
            asyncio.run(worker.start())
        assert SlowToReap.timeouts == 2, "waited, killed, waited again: both timed out"
    finally:
        for process in started:
            process.kill()
            process.wait()


def test_a_worker_that_dies_with_the_connection_queued_is_a_failed_start(
    tmp_path: Path,
) -> None:
    # A shared worker killed while an entrypoint's connection waits in its listen queue resets
    # that connection. The `ConnectionResetError` used to escape the link's start and end the
    # runner's restart loop: its queued requests then waited forever, and the entrypoint,
    # told to stop, waited for them.
    address = str(tmp_path / "worker.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen()  # and never accepts
    link = WorkerLink(address, on_message=lambda _: None, on_exit=lambda _: None)
    failure: list[BaseException] = []

    def start() -> None:
        try:
            asyncio.run(link.start())
        except BaseException as exc:  # whatever it is, the test reads it
            failure.append(exc)

    starting = threading.Thread(target=start)
    starting.start()
    time.sleep(0.5)  # connected: queued, waiting for the greeting
    listener.close()  # the worker dies
    starting.join(15)
    assert not starting.is_alive()
    assert len(failure) == 1 and isinstance(failure[0], WorkerStartError), failure
    assert "dropped the connection" in str(failure[0])

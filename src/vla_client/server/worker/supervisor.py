"""Start, watch and stop the inference worker process from the entrypoint's event loop.

The worker is a fresh interpreter (``python -m vla_client.server.worker FD``), not a fork: the
entrypoint runs uvicorn and thread pools, and forking a threaded process can copy a held lock
into the child; and unlike multiprocessing's spawn it never re-imports the caller's main
module. It costs an interpreter start (well under a second here) and needs the policy to
pickle, which only means its settings: policies load weights in their ``load()`` hook, inside
the worker.

Replies are read by an event-loop reader on the pipe, not a thread, so a finished batch wakes
the waiting requests without a thread hop. End of file on the pipe means the worker died.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from vla_client.server.policy import Policy
from vla_client.server.worker.messages import (
    Batch,
    Ready,
    StartFailed,
    Stop,
    decode_reply,
    encode,
)


class WorkerStartError(RuntimeError):
    """The worker exited or reported an error before it was ready."""


class WorkerProcess:
    """One worker process; `on_message` gets its replies, `on_exit` its death (exit code)."""

    def __init__(
        self,
        policy: Policy,
        *,
        on_message: Callable[[Any], None],
        on_exit: Callable[[int | None], None],
        start_timeout_s: float = 120.0,
    ) -> None:
        self._policy = policy
        self._on_message = on_message
        self._on_exit = on_exit
        self._start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def start(self) -> None:
        """Spawn the worker and wait until its policy is loaded. Raises `WorkerStartError`."""
        parent_socket, child_socket = socket.socketpair()
        fd = child_socket.fileno()
        process = subprocess.Popen(
            [sys.executable, "-m", "vla_client.server.worker", str(fd)], pass_fds=(fd,)
        )
        child_socket.close()
        parent_conn = Connection(parent_socket.detach())
        try:
            await asyncio.to_thread(self._await_ready, parent_conn, process)
        except BaseException:
            parent_conn.close()
            _reap(process, 1.0)
            raise
        self._process, self._conn = process, parent_conn
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(parent_conn.fileno(), self._readable)

    def send(self, batch: Batch) -> None:
        """Hand a batch to the worker (a few hundred bytes; the pipe never fills)."""
        if self._conn is None:
            raise BrokenPipeError("the inference worker is not running")
        self._conn.send_bytes(encode(batch))

    def kill(self) -> None:
        """End a stuck worker; its death is reported through `on_exit` as usual."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the worker to exit, kill it if it does not within `timeout_s`, and reap it."""
        process, conn = self._process, self._detach()
        self._process = None
        if process is None or conn is None:
            return
        with contextlib.suppress(OSError):
            conn.send_bytes(encode(Stop()))
        await asyncio.to_thread(_reap, process, timeout_s)
        conn.close()

    def _await_ready(self, conn: Connection, process: subprocess.Popen[bytes]) -> None:
        conn.send((list(sys.path), pickle.dumps(self._policy)))
        deadline = time.monotonic() + self._start_timeout_s
        while not conn.poll(0.05):
            if process.poll() is not None:
                raise WorkerStartError(f"inference worker exited with code {process.returncode}")
            if time.monotonic() > deadline:
                raise WorkerStartError(
                    f"inference worker not ready after {self._start_timeout_s} s"
                )
        try:
            message = conn.recv()
        except EOFError:
            raise WorkerStartError("inference worker exited before it was ready") from None
        if isinstance(message, StartFailed):
            raise WorkerStartError(f"policy failed to load: {message.error}")
        if not isinstance(message, Ready):
            raise WorkerStartError(f"unexpected first message from worker: {message!r}")

    def _readable(self) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            message = decode_reply(conn.recv_bytes())
        except (EOFError, OSError):
            process = self._process
            self._detach()
            conn.close()
            code = None
            if process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    code = process.wait(0.5)
            self._on_exit(code)
            return
        self._on_message(message)

    def _detach(self) -> Connection | None:
        conn = self._conn
        if conn is not None and self._loop is not None:
            self._loop.remove_reader(conn.fileno())
        self._conn = None
        return conn


def _reap(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout_s)

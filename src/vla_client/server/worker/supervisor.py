"""Start, watch and stop the inference worker process from the entrypoint's event loop.

The worker is a fresh interpreter (``python -m vla_client.server.worker FD``), not a fork: the
entrypoint runs uvicorn and thread pools, and forking a threaded process can copy a held lock
into the child; and unlike multiprocessing's spawn it never re-imports the caller's main
module. It costs an interpreter start (well under a second here) and needs the policy to
travel (`handoff.pack_policy`), which only means its settings: policies load weights in their
``load()`` hook, inside the worker, then warm up, and only then does the worker say `Ready`.

Replies are read by an event-loop reader on the pipe, not a thread, so a finished batch wakes
the waiting requests without a thread hop. End of file on the pipe means the worker died.

A worker can also be shared by several entrypoint processes (``vla-client serve --api-servers``):
one process starts it as here, with a listening Unix socket, and the others reach it through a
`WorkerLink`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from vla_client.errors import PolicyStartError, WorkerStartError
from vla_client.server.policy import Policy
from vla_client.server.worker.channel import Channel
from vla_client.server.worker.handoff import pack_policy
from vla_client.server.worker.messages import (
    Batch,
    Ready,
    Start,
    StartFailed,
    Stop,
    decode_greeting,
    decode_reply,
    encode,
)
from vla_client.server.worker.threads import WorkerThreads, worker_threads


class WorkerChannel:
    """A pipe to a worker, read by the event loop: `on_message` gets its replies, `on_exit` the
    end of the pipe (the worker's exit code where known)."""

    def __init__(
        self, *, on_message: Callable[[Any], None], on_exit: Callable[[int | None], None]
    ) -> None:
        self._on_message = on_message
        self._on_exit = on_exit
        self._conn: Channel | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.decodes_jpeg = False
        """What the worker's `Ready` said: its policy takes JPEG frames encoded."""

    def send(self, batch: Batch) -> None:
        """Hand a batch to the worker (a few hundred bytes; the pipe never fills)."""
        if self._conn is None:
            raise BrokenPipeError("the inference worker is not running")
        self._conn.send(encode(batch))

    def _attach(self, conn: Channel) -> None:
        self._conn = conn
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(conn.fileno(), self._readable)

    def _readable(self) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            frames = conn.receive(wait=False)  # readable: one read, however many replies
        except (EOFError, OSError):
            self._detach()
            conn.close()
            self._on_exit(self._exit_code())
            return
        for frame in frames:
            self._on_message(decode_reply(frame))

    def _exit_code(self) -> int | None:
        return None

    def _detach(self) -> Channel | None:
        conn = self._conn
        if conn is not None and self._loop is not None:
            self._loop.remove_reader(conn.fileno())
        self._conn = None
        return conn


class WorkerProcess(WorkerChannel):
    """One worker process, started and stopped here.

    With a `listener` (a listening Unix socket) the worker is shared: other entrypoint
    processes reach it there through `WorkerLink`. `threads` are its OpenMP settings
    (`worker_threads`; by default those of a worker behind one entrypoint), put in its
    environment: ``OMP_NUM_THREADS`` and ``OMP_WAIT_POLICY`` are read once, when OpenMP loads.
    """

    def __init__(
        self,
        policy: Policy,
        *,
        max_batch: int,
        on_message: Callable[[Any], None],
        on_exit: Callable[[int | None], None],
        listener: socket.socket | None = None,
        start_timeout_s: float = 120.0,
        threads: WorkerThreads | None = None,
    ) -> None:
        super().__init__(on_message=on_message, on_exit=on_exit)
        self.threads = threads or worker_threads(None, 1, os.environ)
        self._policy = policy
        self._max_batch = max_batch
        self._listener = listener
        self._start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def start(self) -> None:
        """Spawn the worker and wait until its policy is loaded and warmed up. Raises
        `WorkerStartError` (`PolicyStartError` when the policy's own hooks raised)."""
        packed = pack_policy(self._policy)
        parent_socket, child_socket = socket.socketpair()
        fds = [child_socket.fileno()]
        if self._listener is not None:
            fds.append(self._listener.fileno())
        process = subprocess.Popen(
            [sys.executable, "-m", "vla_client.server.worker", *map(str, fds)],
            pass_fds=fds,
            env=self.threads.environment(os.environ),
        )
        child_socket.close()
        parent_conn = Channel(parent_socket)
        try:
            ready = await asyncio.to_thread(self._await_ready, parent_conn, process, packed)
        except BaseException:
            parent_conn.close()
            _reap(process, 1.0)
            raise
        self._process = process
        self.decodes_jpeg = ready.decodes_jpeg
        self._attach(parent_conn)

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
            conn.send(encode(Stop()))
        await asyncio.to_thread(_reap, process, timeout_s)
        conn.close()

    def _await_ready(self, conn: Channel, process: subprocess.Popen[bytes], packed: bytes) -> Ready:
        conn.send(encode(Start(tuple(sys.path), packed, self._max_batch)))
        deadline = time.monotonic() + self._start_timeout_s
        while not conn.poll(0.05):
            if process.poll() is not None:
                raise WorkerStartError(f"inference worker exited with code {process.returncode}")
            if time.monotonic() > deadline:
                raise WorkerStartError(
                    f"inference worker not ready after {self._start_timeout_s} s"
                )
        return _greeting(conn)

    def _exit_code(self) -> int | None:
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                return process.wait(0.5)
        return None


class WorkerLink(WorkerChannel):
    """A connection to a shared worker that another process started and restarts.

    `start` connects (waiting up to `start_timeout_s` for a worker that is being restarted);
    `stop` only disconnects. `kill` ends the shared worker: its starter restarts it, and every
    entrypoint's requests in flight get 503, as they would with a worker of their own.

    The starter is this process's parent (``serve --api-servers``): once the parent has changed
    (it died, and this process was handed to another), nobody will restart the worker, and
    `start` fails at once instead of waiting for it. The entrypoint is stopping then (the
    parent's death sends it SIGTERM); without this, its requests waited the whole
    `start_timeout_s` for a worker that could not come back, and the entrypoint, and the
    resource tracker it keeps alive, outlived the server by seconds.
    """

    def __init__(
        self,
        address: str,
        *,
        on_message: Callable[[Any], None],
        on_exit: Callable[[int | None], None],
        start_timeout_s: float = 10.0,
    ) -> None:
        super().__init__(on_message=on_message, on_exit=on_exit)
        self._address = address
        self._start_timeout_s = start_timeout_s
        self._parent = os.getppid()
        self.pid: int | None = None

    async def start(self) -> None:
        """Connect and wait for the worker's `Ready`. Raises `WorkerStartError`."""
        conn, ready = await asyncio.to_thread(self._connect)
        self.pid, self.decodes_jpeg = ready.pid, ready.decodes_jpeg
        self._attach(conn)

    def kill(self) -> None:
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    async def stop(self, timeout_s: float = 5.0) -> None:
        conn = self._detach()
        if conn is not None:
            conn.close()

    def _connect(self) -> tuple[Channel, Ready]:
        deadline = time.monotonic() + self._start_timeout_s
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(self._address)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                if os.getppid() != self._parent:
                    raise WorkerStartError(
                        "the server process that runs the inference worker has exited"
                    ) from None
                if time.monotonic() > deadline:
                    raise WorkerStartError(f"no inference worker at {self._address}") from None
                time.sleep(0.05)
        conn = Channel(sock)
        try:
            if not conn.poll(max(deadline - time.monotonic(), 0.1)):
                raise WorkerStartError(
                    f"the inference worker did not answer within {self._start_timeout_s} s"
                )
            return conn, _greeting(conn)
        except BaseException:
            conn.close()
            raise


def _greeting(conn: Channel) -> Ready:
    """The worker's `Ready`; `PolicyStartError` for a `StartFailed`, `WorkerStartError` if it
    said nothing: it closed the connection, or reset it (a worker killed as it accepted, which
    a restart loop must take as a failed start, not as an error of its own)."""
    try:
        (frame,) = conn.receive()  # the worker says nothing else until it has a batch
        message = decode_greeting(frame)
    except (EOFError, OSError) as exc:
        how = "exited" if isinstance(exc, EOFError) else f"dropped the connection ({exc})"
        raise WorkerStartError(f"inference worker {how} before it was ready") from None
    if isinstance(message, StartFailed):
        raise PolicyStartError(message.error)
    return message


def _reap(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Wait up to `timeout_s` for `process` to exit, else kill it and wait as long again.

    Never raises: it runs while a start error is being raised, which a `TimeoutExpired` of its
    own would replace. A killed process not reaped in time (a machine too busy) is left to
    `subprocess`, which reaps it on a later call.
    """
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout_s)

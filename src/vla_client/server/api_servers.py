"""Several entrypoint processes in front of one inference worker (``serve --api-servers N``).

One entrypoint receives each body, decodes it and answers on a single event loop; with many
robots sending at once that loop, not the policy, is what limits throughput (docs/server.md,
"Measured"). Serving engines put several API-server processes in front of one engine for this
reason (vLLM's ``--api-server-count``, SGLang's tokenizer workers), and so does this::

    this process: owns the worker's Unix socket, keeps the worker alive
      |-- inference worker: one policy; batches from every entrypoint merged into one call
      '-- uvicorn's process supervisor (restarts a dead entrypoint, passes SIGINT/SIGTERM on)
            '-- N entrypoints sharing the port: the usual app, their own shared-memory slots,
                and a `WorkerLink` to the worker

The worker is kept alive by a `WorkerRunner` on an event loop in a thread of this process: it
serves no request itself, but starts the worker, restarts it when it dies, and stops it once
the entrypoints have finished. uvicorn starts the entrypoints (multiprocessing's spawn); each
builds its app from the policy and config it is handed, pickled over the pipe spawn starts it
with, so the API key is never written to a file. A private folder (mode 0700) holds only the
worker's socket.

How it ends:

- SIGINT, SIGTERM or SIGHUP: this process closes its copy of the listening socket at once,
  then tells each entrypoint to stop; they finish the requests in flight and close theirs, so
  a client that connects meanwhile is refused (and retries) rather than accepted into a queue
  that no one serves and then reset. (uvicorn's supervisor restarts its entrypoints on SIGHUP;
  here a hang-up ends the server like SIGTERM, and the entrypoints ignore one sent to the whole
  process group, by a closed terminal, so that they stop only as told.)
- This process killed outright (SIGKILL): the entrypoints get SIGTERM from the kernel
  (`end_with_parent`) and stop as above, the worker gets SIGKILL, the resource tracker unlinks
  what is left and exits once the entrypoints have gone; nothing keeps the port. The private
  folder stays behind; the next start removes it (`remove_stale_folders`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import signal
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess
from uvicorn.supervisors.multiprocess import Process

from vla_client.server.app import ActionServerApp, create_app
from vla_client.server.config import ServerConfig, WorkerSettings, uvicorn_options
from vla_client.server.engine.lifeline import end_with_parent
from vla_client.server.local import bind_listener, listener_url
from vla_client.server.policy import Policy
from vla_client.server.worker import WorkerRunner

log = logging.getLogger("uvicorn.error")
FOLDER_PREFIX = "vla-client-"
"""The private folder of ``serve --api-servers N``: ``vla-client-<pid>-<random>``."""
START_GRACE_S = 120.0
"""How long a new entrypoint may take to answer its first health check (interpreter and
imports); the worker is given as long to load its policy."""


def serve(
    policy: Policy,
    config: ServerConfig,
    count: int,
    *,
    sock: socket.socket | None = None,
    **uvicorn_run: Any,
) -> None:
    """Serve `policy` on ``config.host:config.port`` from `count` entrypoint processes.

    `sock` is the TCP socket to serve on, already bound (the CLI binds it first, to report a
    busy port in one line); without it one is bound here. Returns when the server is stopped
    (SIGINT or SIGTERM), the worker and every shared-memory segment gone. Raises
    `WorkerStartError` if the policy does not load. `uvicorn_run` are more `uvicorn.Config`
    options (``log_level``, ``access_log``).
    """
    listening = sock if sock is not None else bind_listener(config.host, config.port)
    remove_stale_folders()
    prefix = f"{FOLDER_PREFIX}{os.getpid()}-"
    with listening, tempfile.TemporaryDirectory(prefix=prefix) as folder:  # mode 0700
        address = os.path.join(folder, "worker.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(address)
            listener.listen(count * 2)
            with kept_worker(policy, config.worker, listener, entrypoints=count) as runner:
                app = functools.partial(entrypoint_app, policy, config, address, os.getpid())
                settings = uvicorn.Config(
                    app, factory=True, workers=count, **uvicorn_options(config), **uvicorn_run
                )
                if runner.threads is not None:  # after uvicorn.Config, which sets up its log
                    log.info("Inference worker: %s", runner.threads.describe())
                log.info("Uvicorn running on %s (Press CTRL+C to quit)", listener_url(listening))
                _Entrypoints(settings, sockets=[listening]).run()


def entrypoint_app(
    policy: Policy, config: ServerConfig, address: str, parent_pid: int
) -> ActionServerApp:
    """One entrypoint's app (uvicorn's factory): the usual app, linked to the shared worker.

    Runs in the entrypoint process, first thing after uvicorn started it, so the entrypoint
    stops (SIGTERM: it drains, then unlinks its segments) when the serving process dies.
    """
    end_with_parent(parent_pid, signal.SIGTERM)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the serving process turns it into SIGTERM
    return create_app(policy, config, runner=WorkerRunner(policy, config.worker, address=address))


class _Entrypoints(Multiprocess):
    """uvicorn's process supervisor, with two changes.

    The listening socket closes here before shutdown. Otherwise this process holds it open
    until it exits, after the entrypoints have drained: the kernel keeps accepting connections
    into a queue that nothing reads, and resets them all at the end (a reset clients cannot
    tell from a request that failed half-way).

    An entrypoint that is starting is given `START_GRACE_S` to answer uvicorn's health check.
    uvicorn pings every process each half second and kills one that does not answer within
    ``timeout_worker_healthcheck`` (5 s), but a process answers only once its interpreter has
    started and imported the app (fastapi, numpy, the policy's module), which on a busy machine
    takes longer: uvicorn then killed and restarted every entrypoint, over and over, and the
    server never answered (seen at load 17 on 2 cores). So each new process gets one ping when
    it starts, and until it has answered that one (or the grace is over) it is only checked for
    being alive; then uvicorn's own check applies.
    """

    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket]) -> None:
        super().__init__(config, sockets)
        self._starting: dict[Process, float] = {}

    def init_processes(self) -> None:
        super().init_processes()
        for process in self.processes:
            self._watch_start(process)

    def keep_subprocess_alive(self) -> None:
        if self.should_exit.is_set():
            return
        for index, process in enumerate(self.processes):
            if self._still_starting(process):
                continue
            if process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                continue
            process.kill()  # dead, or hung
            process.join()
            if process.exitcode == STARTUP_FAILURE:  # the app cannot start: it never will
                log.error("Child process [%s] failed to start, stopping the parent process.",
                          process.pid)  # fmt: skip
                self.should_exit.set()
                return
            if self.should_exit.is_set():
                return
            log.info("Child process [%s] died", process.pid)
            replacement = Process(self.config, self.sockets)
            replacement.start()
            self._watch_start(replacement)
            self.processes[index] = replacement

    def _watch_start(self, process: Process) -> None:
        """Ping `process` once; its answer, read by `_still_starting`, says it has started."""
        with contextlib.suppress(OSError):  # already gone: the next check replaces it
            process.parent_conn.send(b"ping")
        self._starting[process] = time.monotonic()

    def _still_starting(self, process: Process) -> bool:
        since = self._starting.get(process)
        if since is None:
            return False
        try:
            answered = process.parent_conn.poll(0)
            if answered:
                process.parent_conn.recv_bytes()  # drained unread: never unpickled
        except (OSError, EOFError):
            answered = False
        alive = process.process.is_alive()
        if answered or not alive or time.monotonic() - since > START_GRACE_S:
            del self._starting[process]
            return False
        return True

    def terminate_all(self) -> None:
        for sock in self.sockets:
            sock.close()
        super().terminate_all()

    def handle_hup(self) -> None:
        """A hang-up ends the server as SIGTERM does (uvicorn's own restarts the entrypoints)."""
        log.info("Received SIGHUP, exiting.")
        self.should_exit.set()


def remove_stale_folders(folder: str | None = None) -> list[str]:
    """Remove the private folders of `serve` processes that died without removing them.

    A `serve` killed outright (SIGKILL) leaves ``vla-client-<pid>-*`` (holding only the
    worker's socket) in the temporary folder (`folder`, default `tempfile.gettempdir`). One
    is removed only when it is a real folder (not a link), owned by this user, and no process
    has its pid; a live pid, another user's folder or anything else is left alone. Returns the
    paths removed.
    """
    parent = folder or tempfile.gettempdir()
    removed = []
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            pid = _owner_pid(entry.name)
            if pid is None or _pid_alive(pid):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.path)
    if removed:
        log.info("removed %d folder(s) left by servers that died: %s", len(removed), removed)
    return removed


def _owner_pid(name: str) -> int | None:
    """The pid in a ``vla-client-<pid>-<random>`` name, None for any other name."""
    pid, dash, _ = name.removeprefix(FOLDER_PREFIX).partition("-")
    if not name.startswith(FOLDER_PREFIX) or not dash or not pid.isdigit():
        return None
    return int(pid)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@contextlib.contextmanager
def kept_worker(
    policy: Policy, settings: WorkerSettings, listener: socket.socket, *, entrypoints: int = 1
) -> Iterator[WorkerRunner]:
    """The shared worker, kept alive by a `WorkerRunner` (yielded) on an event loop in its own
    thread; `entrypoints` is how many entrypoint processes it serves."""
    runner = WorkerRunner(policy, settings, listener=listener, entrypoints=entrypoints)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(runner.start(), loop).result()
        try:
            yield runner
        finally:
            asyncio.run_coroutine_threadsafe(runner.close(), loop).result()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

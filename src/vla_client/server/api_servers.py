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
the entrypoints have finished. uvicorn starts the entrypoints (multiprocessing's spawn) and each
builds its app from a spec file in a private folder, next to the worker's socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import socket
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn

from vla_client.server.app import ActionServerApp, create_app
from vla_client.server.config import ServerConfig, WorkerSettings, uvicorn_options
from vla_client.server.policy import Policy
from vla_client.server.worker import WorkerRunner

SPEC_ENV = "VLA_CLIENT_ENTRYPOINT_SPEC"


def serve(policy: Policy, config: ServerConfig, count: int, **uvicorn_run: Any) -> None:
    """Serve `policy` on ``config.host:config.port`` from `count` entrypoint processes.

    Returns when the server is stopped (SIGINT or SIGTERM), the worker and every shared-memory
    segment gone. Raises `WorkerStartError` if the policy does not load. `uvicorn_run` are more
    ``uvicorn.run`` options (``log_level``, ``access_log``).
    """
    with tempfile.TemporaryDirectory(prefix="vla-client-") as folder:  # mode 0700
        address = os.path.join(folder, "worker.sock")
        spec = os.path.join(folder, "entrypoint.pickle")
        with open(spec, "wb") as file:  # holds the API key: the folder is the owner's only
            pickle.dump((policy, config, address), file)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(address)
            listener.listen(count * 2)
            with kept_worker(policy, config.worker, listener):
                os.environ[SPEC_ENV] = spec  # the spawned entrypoints inherit it
                try:
                    uvicorn.run(
                        f"{__name__}:entrypoint_app",
                        factory=True,
                        workers=count,
                        host=config.host,
                        port=config.port,
                        **uvicorn_options(config),
                        **uvicorn_run,
                    )
                finally:
                    del os.environ[SPEC_ENV]


def entrypoint_app() -> ActionServerApp:
    """One entrypoint's app (uvicorn's factory): the usual app, linked to the shared worker."""
    with open(os.environ[SPEC_ENV], "rb") as file:
        policy, config, address = pickle.load(file)
    return create_app(policy, config, runner=WorkerRunner(policy, config.worker, address=address))


@contextlib.contextmanager
def kept_worker(
    policy: Policy, settings: WorkerSettings, listener: socket.socket
) -> Iterator[None]:
    """The shared worker, kept alive by a `WorkerRunner` on an event loop in its own thread."""
    runner = WorkerRunner(policy, settings, listener=listener)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(runner.start(), loop).result()
        try:
            yield
        finally:
            asyncio.run_coroutine_threadsafe(runner.close(), loop).result()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

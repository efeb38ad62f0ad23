"""Run a server on loopback inside this process: for demos, benchmarks and tests.

The socket is bound before uvicorn starts (port 0 picks a free port), so there is no race
between choosing a port and listening on it. Timeouts and connection limits come from the
`ServerConfig` the app was created with, exactly as `vla-client serve` applies them. `start`
returns once the policy is ready (it loads while the server already listens: see
`vla_client.server.engine.startup`), or raises saying why it could not start.
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

import uvicorn
from fastapi import FastAPI

from vla_client.server.config import ServerConfig, uvicorn_options
from vla_client.server.engine.startup import Startup


def bind_listener(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host`:`port`, not yet listening; raises `OSError`.

    ``SO_REUSEADDR`` as uvicorn sets it: a restart is not kept off the port by connections of
    the last run in TIME_WAIT, while a port another socket listens on is still refused.
    IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only when the listener
    says so; with proto 0 every reply stalls ~40 ms on Nagle and delayed ACKs.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def listener_url(sock: socket.socket) -> str:
    """``http://HOST:PORT`` of a bound socket (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class LocalServer:
    """A uvicorn server on 127.0.0.1 in a background thread; `url` is where it listens.

    It runs inside someone else's program (a notebook, a test, `vla-client eval`), so it leaves
    that program's logging as it is: uvicorn's records go to the root logger's handlers, and no
    handler is installed on a stream that may later be closed (a test's captured stderr).
    """

    def __init__(self, app: FastAPI, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self._socket = bind_listener(host, port)
        self.host, self.port = self._socket.getsockname()[:2]
        options = uvicorn_options(getattr(app.state, "config", None) or ServerConfig())
        config = uvicorn.Config(
            app,
            log_level="warning",
            log_config=None,
            access_log=False,
            lifespan="on",
            **options,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:54321``."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 15.0, *, wait_ready: bool = True) -> LocalServer:
        """Start serving; returns once the server accepts connections and, with `wait_ready`,
        once its policy is ready. `RuntimeError` (the server stopped) if it does not start or
        its policy fails to, saying why, or within `timeout` seconds."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("local server failed to start")
            time.sleep(0.01)
        pipeline = getattr(self.app.state, "pipeline", None)  # None: an app of another kind
        if pipeline is not None:
            self._wait_for_policy(pipeline.startup, deadline, timeout, wait_ready=wait_ready)
        return self

    def _wait_for_policy(
        self, startup: Startup, deadline: float, timeout: float, *, wait_ready: bool
    ) -> None:
        """With `wait_ready`, until the policy has loaded (by `deadline`); then, whether or
        not it waited, `RuntimeError` if the policy failed to start."""
        while wait_ready and startup.state == "loading":
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"local server failed to start: no policy after {timeout:g} s")
            time.sleep(0.01)
        if startup.state == "failed":
            self.stop()
            raise RuntimeError(f"local server failed to start: {startup.error}")

    def stop(self, timeout: float = 15.0) -> None:
        """Stop serving and wait for the server thread."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._socket.close()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

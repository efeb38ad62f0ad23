"""The policy starts in the background while the server already listens.

Loading a model can take minutes; a server that listened only afterwards would look dead to
every health check and load balancer meanwhile. So the app's lifespan starts the runner (the
worker spawns, the policy loads and warms up) as a background task and serves at once:
``GET /health`` answers ``{"status": "loading"}`` with 503 until the policy is ready, then
``{"status": "ok"}``; requests meanwhile get 503 with ``Retry-After`` (which every vla-client
transport retries), and the metadata is served from the start, since it is the policy's spec.

A policy that fails to start leaves the state ``failed``: ``/health`` says so (503, without the
error, which can name paths and is for the log), requests get 503 without ``Retry-After``,
since waiting will not help. Whoever runs the server decides what follows: `LocalServer.start`
raises, ``vla-client serve`` stops with one line and exit code 1 (`wait` tells them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Literal

from vla_client.errors import InferenceError
from vla_client.protocol.status import POLICY_LOADING
from vla_client.server.engine.inference import Runner

log = logging.getLogger("vla_client.server.startup")

State = Literal["loading", "ready", "failed"]
RETRY_AFTER_S = 1.0


class Startup:
    """The runner's start, in the background: `state` goes from loading to ready or failed."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.state: State = "loading"
        self.error: Exception | None = None
        self._task: asyncio.Task[None] | None = None
        self._done = asyncio.Event()

    def begin(self) -> None:
        """Start the runner in a task of the running loop; returns at once."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def wait(self) -> Exception | None:
        """Wait until the policy is ready (None) or has failed (the exception it failed with);
        a start cancelled by a shutdown never ends this wait."""
        await self._done.wait()
        return self.error

    def check(self) -> None:
        """Raise the 503 a request gets unless the policy is ready."""
        if self.state == "loading":
            raise InferenceError(503, POLICY_LOADING, retry_after=RETRY_AFTER_S)
        if self.state == "failed":
            raise InferenceError(503, "the policy failed to start; see the server log")

    async def cancel(self) -> None:
        """Stop a start still under way (the server is shutting down)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        try:
            await self.runner.start()
        except Exception as exc:
            self.error = exc
            self.state = "failed"
            log.error("the server cannot serve: %s", str(exc).splitlines()[0] if str(exc) else exc)
        else:
            self.state = "ready"
        self._done.set()  # not for a cancelled start, which neither failed nor became ready

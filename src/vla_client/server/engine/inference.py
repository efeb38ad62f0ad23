"""Runners execute a policy for the HTTP entrypoint without blocking its event loop.

`ThreadRunner` calls the policy in a thread of the same process; `WorkerRunner`
(`vla_client.server.worker`) runs it in a separate inference process and is the default. The
entrypoint only ever hands a runner a `PolicyInput` of arrays, so moving work to another process
needs no pickled object trees. Every runner reports the same stage timings, and a runner that
cannot serve a request raises `InferenceError`, which the app turns into its HTTP status.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Protocol

import numpy as np
from starlette.concurrency import run_in_threadpool

from vla_client.errors import InferenceError, PolicyInputError, PolicyOutputError
from vla_client.server.policy import Policy, PolicyInput, check_actions, start_policy

log = logging.getLogger("vla_client.server")


class RequestMemory(Protocol):
    """Memory a runner lends one request to read its body into (see `Runner.lend_memory`)."""

    def reserve(self, nbytes: int) -> memoryview:
        """A writable buffer of `nbytes` for the body."""

    def release(self) -> None:
        """The request is done with it (its reply is built)."""


class Runner(Protocol):
    """Runs one observation through the policy; returns the chunk and stage timings in ms."""

    batch_sizes: Counter[int]
    """How many policy calls of each batch size it has made (for ``/metrics``)."""

    async def start(self) -> None:
        """Start workers and the policy (`start_policy`); called once, in the background, by
        the app's lifespan. Raises `WorkerStartError` (`PolicyStartError` for the policy's own
        hooks)."""

    @property
    def decodes_jpeg(self) -> bool:
        """Whether the started policy takes JPEG frames encoded (`Policy.decodes_jpeg`)."""

    def lend_memory(self) -> RequestMemory | None:
        """Memory to read a body into, so arrays decoded from it need no copy; None if none.

        The caller passes it to `infer` and releases it when the request is done.
        """

    async def infer(
        self, observation: PolicyInput, memory: RequestMemory | None = None
    ) -> tuple[np.ndarray, dict[str, float]]:
        """Action chunk ``[H, D]`` and timings such as ``inference_ms``."""

    async def close(self) -> None:
        """Stop workers and free resources."""


class ThreadRunner:
    """Runs the policy in a thread of the entrypoint process (the simple, in-process layout)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.batch_sizes: Counter[int] = Counter()
        self._started = False
        self._decodes_jpeg = False

    async def start(self) -> None:
        """Load and warm up the policy (`start_policy`), once: later calls do nothing."""
        if self._started:
            return
        await run_in_threadpool(start_policy, self.policy)
        self._decodes_jpeg = bool(self.policy.decodes_jpeg())
        self._started = True

    @property
    def decodes_jpeg(self) -> bool:
        return self._decodes_jpeg

    def lend_memory(self) -> None:
        """Nothing to lend: the policy reads the decoded arrays where they are."""

    async def infer(
        self, observation: PolicyInput, memory: RequestMemory | None = None
    ) -> tuple[np.ndarray, dict[str, float]]:
        start = time.perf_counter()
        self.batch_sizes[1] += 1
        try:
            (chunk,) = await run_in_threadpool(self.policy.infer_batch, [observation])
            stages = dict(self.policy.batch_timings())
        except PolicyInputError:  # the policy's refusal: its client is told why (400)
            raise
        except Exception as exc:  # logged by the pipeline, with this traceback
            raise InferenceError(
                500, policy_failure_detail(f"{type(exc).__name__}: {exc}")
            ) from exc
        inference_ms = (time.perf_counter() - start) * 1000
        try:
            actions = check_actions(chunk, self.policy.spec, observation.action_horizon)
        except PolicyOutputError as exc:
            log.warning("policy output refused: %s", exc)
            raise InferenceError(500, str(exc)) from exc
        return actions, {"queue_ms": 0.0, "ipc_ms": 0.0, "inference_ms": inference_ms, **stages}

    async def close(self) -> None:
        self.policy.close()


def policy_failure_detail(error: str) -> str:
    """The 500 detail for a policy exception: its type only, never its message or traceback.

    Exception messages can carry paths, tensors or secrets; the full text goes to the log.
    """
    return f"policy failed ({error.split(':', 1)[0]}); details are in the server log"

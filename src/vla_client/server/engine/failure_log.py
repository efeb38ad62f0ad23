"""Server errors in the log: each distinct failure's traceback once, its repeats counted.

A policy that raises on every request would otherwise print the same traceback for each one.
`FailureLog` prints a failure's traceback, with the request id, the first time that failure is
seen (a failure is its detail, the traceback's frames and its exception type: two requests
failing on the same line with different messages are one failure); a repeat is counted, and at
most once per `summary_interval_s` a one-line summary says how many repeats there were and
names the last request's id.

In the worker layout the policy raises in another process: the worker formats the traceback
there and sends the text, which reaches here as the runner's `InferenceError.policy_traceback`,
so the log shows the policy's own file and line either way.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from vla_client.errors import InferenceError

_MAX_KINDS = 256  # failures remembered; the oldest is forgotten (and printed again if seen)


def traceback_text(exc: BaseException) -> str:
    """The traceback to log for `exc`: the policy's, for a runner's `InferenceError` (formatted
    in the worker process, or its cause's in-process), else `exc`'s own; empty if none."""
    if isinstance(exc, InferenceError):
        if exc.policy_traceback:
            return exc.policy_traceback
        cause = exc.__cause__
        return "" if cause is None else "".join(traceback.format_exception(cause))
    return "".join(traceback.format_exception(exc))


@dataclass
class _Kind:
    first_request: str | None
    last_summary: float
    repeats: int = 0
    unreported: int = 0


class FailureLog:
    """Logs failures to `logger` at ERROR: a traceback once per distinct failure, then counts."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        summary_interval_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval_s = summary_interval_s
        self._clock = clock
        self._kinds: OrderedDict[tuple[str, tuple[str, ...]], _Kind] = OrderedDict()

    def record(self, detail: str, request_id: str | None, text: str) -> None:
        """Log the failure `detail` of request `request_id`, with traceback `text` (may be
        empty) unless the same failure was logged before."""
        key = (detail, _signature(text))
        now = self._clock()
        kind = self._kinds.get(key)
        if kind is None:
            if len(self._kinds) >= _MAX_KINDS:
                self._kinds.popitem(last=False)
            self._kinds[key] = _Kind(request_id, now)
            shown = f"\n{text.rstrip()}" if text else ""
            self._logger.error("%s (request %s)%s", detail, request_id, shown)
            return
        self._kinds.move_to_end(key)
        kind.repeats += 1
        kind.unreported += 1
        if now - kind.last_summary >= self._interval_s:
            self._logger.error(
                "%s (request %s): the same failure %d more times in the last %.0f s, "
                "%d since its traceback was logged for request %s",
                detail, request_id, kind.unreported, now - kind.last_summary, kind.repeats,
                kind.first_request,
            )  # fmt: skip
            kind.last_summary = now
            kind.unreported = 0


def _signature(text: str) -> tuple[str, ...]:
    """What makes two tracebacks the same failure: their frame lines and the exception types,
    without the messages (which may hold a value that differs every time)."""
    lines = text.splitlines()
    frames = [line.strip() for line in lines if line.startswith('  File "')]
    types = [
        line.split(":", 1)[0]
        for line in lines
        if line and not line[0].isspace() and not line.startswith("Traceback")
    ]
    return (*frames, *types)

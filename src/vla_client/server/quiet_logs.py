"""Logging that a client cannot flood: refusals are counted and summed up, not logged one by one.

Anyone who can reach the port can send a thousand bad keys a second; each refusal is worth
knowing about, but not worth a log line. `RateLimitedLog` writes the first refusal at once and
then at most one line per `interval_s`, saying how many came meanwhile.

uvicorn's websocket implementation (websockets-sansio, its default) also logs an ERROR, "ASGI
callable returned without completing handshake", after every handshake an app refuses with an
HTTP response, though the client got that response. This server's routes always complete the
handshake they start, so that line can only mean a refusal: `quiet_refused_handshakes` drops it
from uvicorn's error log, and `RateLimitedLog` speaks for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

_UVICORN_LOGGER = "uvicorn.error"
_REFUSED_HANDSHAKE = "ASGI callable returned without completing handshake."


class RateLimitedLog:
    """``info`` lines on `logger`, the first at once, then at most one per `interval_s`."""

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._next_at = 0.0
        self._held = 0

    def info(self, message: str) -> None:
        """Log `message`, or count it when a line went out less than `interval_s` ago."""
        with self._lock:
            now = self._clock()
            if now < self._next_at:
                self._held += 1
                return
            held, self._held = self._held, 0
            self._next_at = now + self._interval_s
        more = f" (and {held} more since the last line)" if held else ""
        self._logger.info("%s%s", message, more)


class _DropRefusedHandshakes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _REFUSED_HANDSHAKE


_FILTER = _DropRefusedHandshakes()


def quiet_refused_handshakes() -> None:
    """Drop uvicorn's ERROR line for refused websocket handshakes (idempotent)."""
    logging.getLogger(_UVICORN_LOGGER).addFilter(_FILTER)

"""Logging that a client cannot flood or read secrets from: refusals summed up, keys redacted.

Anyone who can reach the port can send a thousand bad keys a second; each refusal is worth
knowing about, but not worth a log line. `RateLimitedLog` writes the first refusal at once and
then at most one line per `interval_s`, saying how many came meanwhile.

uvicorn's websocket implementation (websockets-sansio, its default) also logs an ERROR, "ASGI
callable returned without completing handshake", after every handshake an app refuses with an
HTTP response, though the client got that response. This server's routes always complete the
handshake they start, so that line can only mean a refusal: `quiet_refused_handshakes` drops it
from uvicorn's error log, and `RateLimitedLog` speaks for it.

Nor does a log line carry a credential: a client that puts its key in the query string
(``?api_key=...``) is refused, but uvicorn's access log and its websocket lines write the whole
target. `redact_credentials_in_logs` rewrites every line of uvicorn's loggers and of this
package's: ``key=``, ``api_key=``, ``token=`` (and ``apikey``, ``api-key``, ``access_token``)
values, ``Bearer``/``Api-Key``/``Basic`` credentials and ``Authorization`` header values become
``[redacted]``, in the message, its arguments and a logged traceback.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable

_UVICORN_LOGGER = "uvicorn.error"
REDACTED = "[redacted]"
_CREDENTIALS = (
    # A query parameter (or any name=value) whose name says it carries a secret.
    (re.compile(r"(?<![\w-])((?:api[_-]?key|access[_-]?token|key|token)=)[^&\s\"',;)]*", re.I),
     rf"\1{REDACTED}"),
    # A credential after its scheme, wherever it appears (a header line, a repr of headers).
    (re.compile(r"\b(bearer|api-key|basic)(\s+)[^\s\"',;)]+", re.I), rf"\1\2{REDACTED}"),
    # An Authorization header's value without a scheme, as text or as a repr of header pairs.
    # ((?=(X))\2 matches X atomically, as (?>X) does from Python 3.11 on: the separator
    # cannot give back characters so that the lookahead after it sees no scheme.)
    (re.compile(r"(authorization\b(?=(['\"]?\s*[:=,]\s*(?:(?-i:b)?['\"])?))\2)"
                r"(?!(?:bearer|api-key|basic)\b|\[redacted\])[^\s\"',;)]+", re.I),
     rf"\1{REDACTED}"),
)  # fmt: skip
_REDACTED_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")
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


def redact(text: str) -> str:
    """`text` with every credential it carries replaced by ``[redacted]``."""
    for pattern, replacement in _CREDENTIALS:
        text = pattern.sub(replacement, text)
    return text


class _RedactCredentials(logging.Filter):
    """Rewrites a record's message, arguments and traceback without their credentials.

    Arguments stay arguments (uvicorn's access formatter unpacks them): one whose text carries
    a credential is replaced by that text redacted, the others are left as they are.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redacted_argument(value) for value in record.args)
        elif isinstance(record.args, dict):
            record.args = {name: _redacted_argument(v) for name, v in record.args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True


def _redacted_argument(value: object) -> object:
    if isinstance(value, (int, float)):  # %d and %f keep working
        return value
    text = str(value)
    redacted = redact(text)
    return value if redacted == text else redacted


_REDACTION = _RedactCredentials()


def redact_credentials_in_logs() -> None:
    """Redact credentials on uvicorn's loggers and every logger of this package (idempotent).

    A filter on a logger sees only the records made on that logger, so it goes on each: the
    package's loggers all exist once its modules are imported, as they are by a running app.
    """
    names = [*_REDACTED_LOGGERS, *(n for n in logging.root.manager.loggerDict if _ours(n))]
    for name in names:
        logger = logging.getLogger(name)
        if _REDACTION not in logger.filters:
            logger.addFilter(_REDACTION)


def _ours(name: str) -> bool:
    return name == "vla_client" or name.startswith("vla_client.")

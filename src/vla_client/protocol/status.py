"""How failures cross the wire: errors to statuses on the server, statuses to errors on the client.

A server maps each failure to an HTTP status with `error_status`, and sends it in the form the
transport allows: over HTTP a status line, a JSON ``{"detail": ...}`` body and, for a 503 that
will pass, ``Retry-After``; over a websocket an error frame, then a close whose code is 4000 plus
the status (websocket codes 4000-4999 are the application's own), with ``retry-after=<s>`` as
the close reason when there is one. The error frame is ``{"error": detail, "status": ...,
"retry_after": ...}`` in msgpack on the realtime endpoint, and plain text on openpi's endpoint,
which is what openpi's own client raises on. A client reads any of these back with
`vla_client.protocol.read_reply`, so both transports raise the same `ServerError` and retry alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from vla_client.errors import (
    CodecError,
    InferenceError,
    InvalidObservationError,
    PayloadTooLargeError,
    UnsupportedContentTypeError,
)

INTERNAL_ERROR = 500
CLOSE_CODE_BASE = 4000
"""Websocket close code for HTTP status S: ``CLOSE_CODE_BASE + S`` (4503, 4400, ...)."""
_RETRY_AFTER_REASON = "retry-after="
POLICY_LOADING = "the policy is loading"
"""The detail of the 503 (with ``Retry-After``) a reference server answers while its policy
loads and warms up. A client that reads it waits for the warm-up (`RetryPolicy.warm_up_s`,
within the request's deadline) rather than giving up after its usual few retries."""


@dataclass(frozen=True)
class ErrorStatus:
    """A failure as it goes on the wire: status, the detail shown to the client, Retry-After."""

    status: int
    detail: str
    retry_after: float | None = None

    @property
    def close_code(self) -> int:
        """The websocket close code that carries `status`."""
        return CLOSE_CODE_BASE + self.status

    @property
    def close_reason(self) -> str:
        """The websocket close reason: ``retry-after=<s>`` when the client may come back."""
        return "" if self.retry_after is None else f"{_RETRY_AFTER_REASON}{self.retry_after:g}"


def error_status(exc: BaseException) -> ErrorStatus | None:
    """The status a request failure maps to, or None for an unexpected error (a bug: 500).

    Bad input is 4xx with the error's own message (it names the field); a failure of the
    runner carries its status.
    """
    if isinstance(exc, InferenceError):
        return ErrorStatus(exc.status_code, exc.detail, exc.retry_after)
    if isinstance(exc, UnsupportedContentTypeError):
        return ErrorStatus(415, str(exc))
    if isinstance(exc, PayloadTooLargeError):
        return ErrorStatus(413, str(exc))
    if isinstance(exc, CodecError | InvalidObservationError):
        return ErrorStatus(400, str(exc))
    return None


def redirect_detail(status: int, location: str | None) -> str:
    """What a client says of a 3xx reply, which it never follows: following would send the API
    key to wherever the server pointed."""
    where = f"to {location}" if location else "without saying where (no Location header)"
    return (
        f"the server redirected {where} (HTTP {status}); not followed, the API key was not sent "
        "there: use the URL the server names as base_url if it is to be trusted"
    )


def status_from_close(code: int | None, reason: str | None) -> ErrorStatus:
    """The status and Retry-After a websocket close carries (500 when it carries none)."""
    status = INTERNAL_ERROR
    if code is not None and CLOSE_CODE_BASE + 400 <= code < CLOSE_CODE_BASE + 600:
        status = code - CLOSE_CODE_BASE
    return ErrorStatus(
        status, "", parse_retry_after((reason or "").removeprefix(_RETRY_AFTER_REASON))
    )


def parse_retry_after(value: object) -> float | None:
    """Seconds from a ``Retry-After`` value (a number of seconds), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value >= 0 else None
    if isinstance(value, str):
        try:
            seconds = float(value.strip())
        except ValueError:
            return None
        return seconds if seconds >= 0 else None
    return None

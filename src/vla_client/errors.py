"""The exceptions vla-client raises, under one base class.

Client code catches `VLAClientError` for "anything went wrong talking to the policy", or one of
the subclasses to decide what to do next: fix the input (`InvalidObservationError`), retry later
(`ConnectError`, `RequestTimeoutError`, `ServerError` with a 503), or report a bug in the server
(`ProtocolError`). The codecs raise `CodecError`; the server turns it into a 400 (or a 413 for
`PayloadTooLargeError`) naming the field.
"""

from __future__ import annotations


class VLAClientError(Exception):
    """Base class of every error raised by vla-client."""


class InvalidObservationError(VLAClientError, ValueError):
    """An observation that cannot be sent: wrong shape or dtype, NaN state, no cameras."""


class CodecError(VLAClientError, ValueError):
    """A payload that cannot be encoded or decoded: corrupt base64, truncated PNG, bad dtype.

    `field` names where in the request the bad value sits (for example
    ``input.observation.images.wrist``), so the server can say so in its 400 detail.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class PayloadTooLargeError(CodecError):
    """A body or image over a configured limit (a decompression bomb, say): a 413 on the server."""


class ProtocolError(VLAClientError):
    """The server's reply does not follow the action API (missing actions, wrong request id)."""


class TransportError(VLAClientError):
    """The request did not complete at the transport level."""


class ConnectError(TransportError):
    """The server could not be reached (refused, DNS failure, connection dropped)."""


class RequestTimeoutError(TransportError):
    """The server did not answer within the configured timeout."""


class ServerError(VLAClientError):
    """The server answered with an error status; `status_code` and `detail` say which and why."""

    def __init__(self, status_code: int, detail: str, *, retry_after: float | None = None) -> None:
        self.status_code = status_code
        self.detail = detail
        self.retry_after = retry_after
        super().__init__(f"server answered {status_code}: {detail}")


class UnsupportedContentTypeError(CodecError):
    """A body in a content type the action API does not speak; the server answers 415."""


class DeadlineExceededError(RequestTimeoutError):
    """No usable reply within the request's deadline; a reply that comes later is never used."""


class MismatchedReplyError(ProtocolError):
    """A reply carrying another request's id; it is dropped, never returned for this request."""


class StaleObservationError(VLAClientError):
    """An observation older than the client's ``max_observation_age``; it was not sent.

    Transient: a fresh observation goes through. `age_s` is how old the oldest frame was.
    """

    def __init__(self, age_s: float, max_age_s: float) -> None:
        self.age_s = age_s
        self.max_age_s = max_age_s
        super().__init__(
            f"observation is {age_s * 1e3:.0f} ms old, over the limit of {max_age_s * 1e3:.0f} ms"
        )

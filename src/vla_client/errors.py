"""Every exception vla-client raises, in one tree under `VLAClientError`.

::

    VLAClientError
    ├── InvalidObservationError (ValueError)   fix the observation: shape, dtype, NaN state
    │   ├── ContractError                       it does not fit what the server announced
    │   └── PolicyInputError                    server side: a policy cannot read it (400)
    ├── StaleObservationError                   too old to send (max_observation_age_s)
    ├── CodecError (ValueError)                 a payload that cannot be encoded or decoded
    │   ├── PayloadTooLargeError                over a size limit (413 on the server)
    │   └── UnsupportedContentTypeError         not JSON or msgpack (415 on the server)
    ├── ProtocolError                           a reply that does not follow the action API
    │   ├── MismatchedReplyError                a reply to another request
    │   └── ReplyTooLargeError                  a reply over the client's size cap, cut off
    ├── TransportError                          the exchange did not complete
    │   ├── ConnectError                        server unreachable, or the connection dropped
    │   └── RequestTimeoutError                 no reply within the timeout
    │       └── DeadlineExceededError           no usable reply within the request's deadline
    ├── ServerError                             the server answered with an error status
    │   ├── ServerErrorFrame                    an error message on a connection kept open
    │   └── RefusalsError                       a control loop's requests refused, in a row
    ├── CameraError                             a camera cannot be opened or read
    │   ├── CameraSettingError (ValueError)     a camera or rig option out of range
    │   ├── CameraTimeoutError (TimeoutError)   no new frame in time
    │   └── StaleFrameError                     a frame older than allowed
    ├── RecordingError (ValueError)             not a recording, or a corrupt one
    │   └── TruncatedRecordingError             cut off inside a step (its whole steps read)
    ├── UnsafeActionError                       the safety gate stopped an action
    ├── ModeNotSupportedError (ValueError)      a chunk mode the server cannot do (rtc)
    ├── ServerSilentError                       the watchdog stopped the robot
    ├── ClockStoppedError                       a loop's monotonic clock stood still
    ├── InferenceError                          server side: a request the runner could not serve
    ├── WorkerStartError (RuntimeError)         server side: the inference worker did not start
    │   └── PolicyStartError                    the policy's load() or warm_up() raised
    ├── PolicyLoadError (ValueError)            server side: a policy name that gives no policy
    └── PolicyOutputError (ValueError)          server side: a policy's chunk is malformed

The server-side errors are offered by `vla_client.server`; the rest by `vla_client` itself.
Client code catches `VLAClientError` for "anything went wrong talking to the policy", or a
subclass to decide what to do next: fix the input (`InvalidObservationError`), retry later
(`ConnectError`, `RequestTimeoutError`, `ServerError` with ``retryable``), or report a bug in
the server (`ProtocolError`). Errors about one request carry its `request_id` (None when the
request never got one, such as a bad observation refused before encoding).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


class VLAClientError(Exception):
    """Base class of every error raised by vla-client.

    `request_id` names the request the error concerns, where there is one.
    """

    def __init__(self, *args: object, request_id: str | None = None) -> None:
        super().__init__(*args)
        self.request_id = request_id


class InvalidObservationError(VLAClientError, ValueError):
    """An observation that cannot be sent: wrong shape or dtype, NaN state, no cameras."""


@dataclass(frozen=True)
class OptionFix:
    """A client option that would fix a `ContractError`, kept as data so that each caller can
    name it in its own terms: ``resize='pad'`` in Python, ``--resize pad`` on the command line.

    `option` is the `ActionClient` keyword (``camera_map``, ``resize``), `values` the values to
    try, best first; `before` and `after` are the words around them.
    """

    option: str
    values: tuple[object, ...]
    before: str = ""
    after: str = ""

    def describe(self, spell: Callable[[str, object], str] | None = None) -> str:
        """The fix in words; `spell(option, value)` writes one value (default: a keyword)."""
        spell = spell or _keyword
        return self.before + " or ".join(spell(self.option, v) for v in self.values) + self.after


def _keyword(option: str, value: object) -> str:
    """``resize='pad'``: an option as a Python caller writes it."""
    return f"{option}={value!r}"


class ContractError(InvalidObservationError):
    """An observation that does not fit what the server announced in its metadata.

    `field` is the part of the metadata it breaks (``input.image_keys``, ``input.state_dim``,
    ``input.image_size``), `expected` what the server announced, `given` what the observation
    has, `hint` what to do in words and `fix` the option that would fix it, if one would (the
    message names it as an `ActionClient` keyword; `describe` can name it otherwise). Nothing
    was sent.
    """

    def __init__(
        self,
        field: str,
        expected: object,
        given: object,
        hint: str = "",
        *,
        fix: OptionFix | None = None,
    ) -> None:
        self.field = field
        self.expected = expected
        self.given = given
        self.hint = hint
        self.fix = fix
        super().__init__(self.describe())

    def describe(self, spell: Callable[[str, object], str] | None = None) -> str:
        """The message, with the fix's option written by `spell` (see `OptionFix.describe`)."""
        message = f"{self.field}: the server expects {self.expected}, "
        message += f"the observation has {self.given}"
        advice = [text for text in (self.hint, self.fix and self.fix.describe(spell)) if text]
        return "; ".join([message, *advice])


class StaleObservationError(VLAClientError):
    """An observation older than the client's ``max_observation_age_s``; it was not sent.

    Transient: a fresh observation goes through. `age_s` is how old the oldest frame was.
    """

    def __init__(self, age_s: float, max_age_s: float) -> None:
        self.age_s = age_s
        self.max_age_s = max_age_s
        super().__init__(
            f"observation is {age_s * 1e3:.0f} ms old, over the limit of {max_age_s * 1e3:.0f} ms"
        )


class CodecError(VLAClientError, ValueError):
    """A payload that cannot be encoded or decoded: corrupt base64, truncated PNG, bad dtype.

    `field` names where in the request the bad value sits (for example
    ``input.observation.images.wrist``), so the server can say so in its 400 detail.
    """

    def __init__(
        self, message: str, *, field: str | None = None, request_id: str | None = None
    ) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message, request_id=request_id)


class PayloadTooLargeError(CodecError):
    """A body or image over a configured limit (a decompression bomb, say): a 413 on the server."""


class UnsupportedContentTypeError(CodecError):
    """A body in a content type the action API does not speak; the server answers 415."""


class ProtocolError(VLAClientError):
    """The server's reply does not follow the action API (missing actions, wrong request id)."""


class MismatchedReplyError(ProtocolError):
    """A reply carrying another request's id; it is dropped, never returned for this request."""


class ReplyTooLargeError(ProtocolError):
    """A reply over the client's ``max_reply_bytes``; it was cut off, not read to the end.

    `limit` is the cap in bytes. The connection it came on is closed.
    """

    def __init__(self, limit: int, what: str = "the reply", *, request_id: str | None = None):
        self.limit = limit
        super().__init__(
            f"{what} is over the limit of {limit} bytes (max_reply_bytes); cut off, not read "
            "to the end",
            request_id=request_id,
        )


class TransportError(VLAClientError):
    """The request did not complete at the transport level."""


class ConnectError(TransportError):
    """The server could not be reached (refused, DNS failure, connection dropped).

    `sent` is False when the request certainly never left (the connection never opened), so
    retrying it cannot run the policy twice; `retry_after` is how long until a new connection
    may be tried, when the transport is holding back after failures.
    """

    def __init__(
        self,
        *args: object,
        sent: bool = True,
        retry_after: float | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(*args, request_id=request_id)
        self.sent = sent
        self.retry_after = retry_after


class RequestTimeoutError(TransportError):
    """The server did not answer within the configured timeout."""


class DeadlineExceededError(RequestTimeoutError):
    """No usable reply within the request's deadline; a reply that comes later is never used."""


KEY_ADVICE = (
    "give the server's key: api_key= in Python, --api-key on the command line, or the "
    "VLA_CLIENT_API_KEY environment variable for either"
)


class ServerError(VLAClientError):
    """The server answered with an error status; `status_code` and `detail` say which and why.

    `retry_after` is the server's ``Retry-After`` in seconds, when it sent one: the server is
    busy or restarting and the same request may succeed later.
    """

    def __init__(
        self,
        status_code: int,
        detail: str,
        *,
        retry_after: float | None = None,
        request_id: str | None = None,
    ) -> None:
        self.status_code = status_code
        self.detail = detail
        self.retry_after = retry_after
        message = f"server answered {status_code}: {detail}"
        if status_code == 401:
            message += f"; {KEY_ADVICE}"
        super().__init__(message, request_id=request_id)

    @property
    def retryable(self) -> bool:
        """A 503 with ``Retry-After``: the policy did not run, and will take the request later."""
        return self.status_code == 503 and self.retry_after is not None


class ServerErrorFrame(ServerError):
    """An error the server sent as a message (vLLM-Omni's ``{"type": "error", "message",
    "code"}``, or the text frame it sends in place of its config when no policy is loaded);
    `code` is the frame's code (such as ``unsupported``), None when it sent none. Its replies
    carry no request id, so the client opens a new connection for the next request: anything
    else the server sends for this one would be read as the next one's reply."""

    def __init__(
        self,
        status_code: int,
        detail: str,
        *,
        code: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(
            status_code, detail if code is None else f"{detail} ({code})", request_id=request_id
        )
        self.code = code
        self.detail = detail


class RefusalsError(ServerError):
    """The server refused a control loop's requests `refusals` times in a row (a 4xx each), so
    the loop ends: one refusal is retried on the next tick while the watchdog holds the robot,
    a run of them (``ChunkExecutor(max_refusals=)``) is a server that will not serve this
    robot. `status_code`, `detail` and `request_id` are the last refusal's."""

    def __init__(self, last: ServerError, refusals: int) -> None:
        super().__init__(
            last.status_code, last.detail, retry_after=last.retry_after, request_id=last.request_id
        )
        self.refusals = refusals
        self.args = (f"the server refused {refusals} requests in a row; the last: {last}",)


class CameraError(VLAClientError):
    """A camera that cannot be opened, is not open, or was configured wrongly."""


class CameraSettingError(CameraError, ValueError):
    """A camera or rig option that cannot work (a rate of 0, a negative size), refused when the
    camera is made rather than when it is first read."""


class CameraTimeoutError(CameraError, TimeoutError):
    """No new frame arrived within the configured timeout (stalled or disconnected camera)."""


class StaleFrameError(CameraError):
    """A frame older than the configured maximum age; sending it would mislead the policy."""


class RecordingError(VLAClientError, ValueError):
    """A file that is not a recording (of observations or action chunks), or a truncated or
    corrupt one."""


class TruncatedRecordingError(RecordingError):
    """A recording that ends inside a record (a full disk, a killed recorder): the steps before
    the cut read as written, and a reader that wants them can stop here instead of failing."""


class UnsafeActionError(VLAClientError):
    """An action or chunk failed a safety check, and nothing of it was sent to the robot."""


class ModeNotSupportedError(VLAClientError, ValueError):
    """A chunk execution mode the server cannot do: real-time chunking asked of a server that
    does not announce it, or whose reply does not say it applied it. Never run as another mode."""


class ServerSilentError(VLAClientError):
    """The server sent no chunk within the watchdog timeout and the behaviour is ``stop``."""


class ClockStoppedError(VLAClientError):
    """A control loop's monotonic clock did not advance while the loop slept for real: a broken
    clock source, on which the loop would sleep forever and its watchdog never trip."""


class InferenceError(VLAClientError):
    """Server side: a request the runner could not serve, with the HTTP status it maps to.

    503 (busy, worker down or restarting; `retry_after` says when to come back), 500 (the
    policy failed), 504 (inference ran past its timeout). `policy_traceback` is the policy's
    exception as formatted where it was raised (the worker process), for the server log only.
    """

    def __init__(
        self,
        status_code: int,
        detail: str,
        *,
        retry_after: float | None = None,
        request_id: str | None = None,
        policy_traceback: str = "",
    ) -> None:
        super().__init__(detail, request_id=request_id)
        self.status_code = status_code
        self.detail = detail
        self.retry_after = retry_after
        self.policy_traceback = policy_traceback


class WorkerStartError(VLAClientError, RuntimeError):
    """Server side: the inference worker exited or reported an error before it was ready."""


class PolicyLoadError(VLAClientError, ValueError):
    """Server side: a policy name, import path, plugin or option that does not give a policy."""


class PolicyStartError(WorkerStartError):
    """Server side: the policy's ``load()`` or ``warm_up()`` raised, in the worker or the thread
    that runs it; the message names the step and the exception's type and first line."""


class PolicyInputError(InvalidObservationError):
    """Server side: a policy cannot read an observation it was given (a frame that does not show
    what it looks for, say). Raised by `Policy.infer` (or `infer_batch`), it refuses that request
    with 400 and the message as its detail, the policy's own words for its client: say what it
    needs. The other observations of a batch it came in are answered each on its own."""


class PolicyOutputError(VLAClientError, ValueError):
    """Server side: a policy returned something that is not an action chunk of the shape it
    announces (not numbers, a wrong shape, NaN or infinity); the request gets 500 saying so."""

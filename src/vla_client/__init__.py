"""vla-client: send robot camera frames to VLA policy servers, get action chunks back as numpy.

The public API is small: build an `Observation`, send it with `ActionClient` (or
`AsyncActionClient`), read `ActionResult.actions`. `encode_request` gives the wire bytes for
use with any HTTP stack. Every error is a `VLAClientError` (see `vla_client.errors` for the
tree). The reference server, with the names only a server needs (`decode_request`,
`InferenceError`, the worker's and the policies' errors), lives in `vla_client.server` (extra
``server``) and is never imported from here.

Names load on first use (see `vla_client._lazy`): ``import vla_client`` imports nothing heavy,
and ``from vla_client import Observation`` does not load the HTTP client.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face
from vla_client._version import __version__ as __version__

if TYPE_CHECKING:
    from vla_client.client.async_client import AsyncActionClient as AsyncActionClient
    from vla_client.client.checks import mismatched_cameras as mismatched_cameras
    from vla_client.client.options import ClientOptions as ClientOptions
    from vla_client.client.result import ActionResult as ActionResult
    from vla_client.client.result import Timings as Timings
    from vla_client.client.sync_client import ActionClient as ActionClient
    from vla_client.errors import CameraError as CameraError
    from vla_client.errors import CameraSettingError as CameraSettingError
    from vla_client.errors import CameraTimeoutError as CameraTimeoutError
    from vla_client.errors import ClockStoppedError as ClockStoppedError
    from vla_client.errors import CodecError as CodecError
    from vla_client.errors import ConnectError as ConnectError
    from vla_client.errors import ContractError as ContractError
    from vla_client.errors import DeadlineExceededError as DeadlineExceededError
    from vla_client.errors import InvalidObservationError as InvalidObservationError
    from vla_client.errors import MismatchedReplyError as MismatchedReplyError
    from vla_client.errors import ModeNotSupportedError as ModeNotSupportedError
    from vla_client.errors import PayloadTooLargeError as PayloadTooLargeError
    from vla_client.errors import ProtocolError as ProtocolError
    from vla_client.errors import RecordingError as RecordingError
    from vla_client.errors import RefusalsError as RefusalsError
    from vla_client.errors import ReplyTooLargeError as ReplyTooLargeError
    from vla_client.errors import RequestTimeoutError as RequestTimeoutError
    from vla_client.errors import ServerError as ServerError
    from vla_client.errors import ServerErrorFrame as ServerErrorFrame
    from vla_client.errors import ServerSilentError as ServerSilentError
    from vla_client.errors import StaleFrameError as StaleFrameError
    from vla_client.errors import StaleObservationError as StaleObservationError
    from vla_client.errors import TransportError as TransportError
    from vla_client.errors import TruncatedRecordingError as TruncatedRecordingError
    from vla_client.errors import UnsafeActionError as UnsafeActionError
    from vla_client.errors import UnsupportedContentTypeError as UnsupportedContentTypeError
    from vla_client.errors import VLAClientError as VLAClientError
    from vla_client.observation import Observation as Observation
    from vla_client.protocol.models import ActionMetadata as ActionMetadata
    from vla_client.protocol.request import encode_request as encode_request
    from vla_client.transports.retry import Backoff as Backoff
    from vla_client.transports.retry import RetryPolicy as RetryPolicy

# What `lazy_face` hands out: each name of the block above, from the same module.
_FACE = {
    "AsyncActionClient": "vla_client.client.async_client",
    "mismatched_cameras": "vla_client.client.checks",
    "ClientOptions": "vla_client.client.options",
    "ActionResult": "vla_client.client.result",
    "Timings": "vla_client.client.result",
    "ActionClient": "vla_client.client.sync_client",
    "CameraError": "vla_client.errors",
    "CameraSettingError": "vla_client.errors",
    "CameraTimeoutError": "vla_client.errors",
    "ClockStoppedError": "vla_client.errors",
    "CodecError": "vla_client.errors",
    "ConnectError": "vla_client.errors",
    "ContractError": "vla_client.errors",
    "DeadlineExceededError": "vla_client.errors",
    "InvalidObservationError": "vla_client.errors",
    "MismatchedReplyError": "vla_client.errors",
    "PayloadTooLargeError": "vla_client.errors",
    "ProtocolError": "vla_client.errors",
    "RecordingError": "vla_client.errors",
    "RefusalsError": "vla_client.errors",
    "TruncatedRecordingError": "vla_client.errors",
    "RequestTimeoutError": "vla_client.errors",
    "ServerError": "vla_client.errors",
    "ModeNotSupportedError": "vla_client.errors",
    "ServerErrorFrame": "vla_client.errors",
    "ServerSilentError": "vla_client.errors",
    "StaleFrameError": "vla_client.errors",
    "StaleObservationError": "vla_client.errors",
    "TransportError": "vla_client.errors",
    "UnsafeActionError": "vla_client.errors",
    "UnsupportedContentTypeError": "vla_client.errors",
    "VLAClientError": "vla_client.errors",
    "ReplyTooLargeError": "vla_client.errors",
    "Observation": "vla_client.observation",
    "ActionMetadata": "vla_client.protocol.models",
    "encode_request": "vla_client.protocol.request",
    "Backoff": "vla_client.transports.retry",
    "RetryPolicy": "vla_client.transports.retry",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)

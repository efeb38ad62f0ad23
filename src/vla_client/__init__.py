"""vla-client: send robot camera frames to VLA policy servers, get action chunks back as numpy.

The public API is small: build an `Observation`, send it with `ActionClient` (or
`AsyncActionClient`), read `ActionResult.actions`. `encode_request` / `decode_request` give the
wire bytes for use with any HTTP stack. The reference server lives in `vla_client.server`
(extra ``server``) and is never imported from here.
"""

from vla_client.client import (
    ActionClient,
    ActionResult,
    AsyncActionClient,
    Timings,
    mismatched_cameras,
)
from vla_client.errors import (
    CameraError,
    CameraTimeoutError,
    CodecError,
    ConnectError,
    ContractError,
    DeadlineExceededError,
    InferenceError,
    InvalidObservationError,
    MismatchedReplyError,
    PayloadTooLargeError,
    ProtocolError,
    RecordingError,
    RequestTimeoutError,
    ServerError,
    ServerSilentError,
    StaleFrameError,
    StaleObservationError,
    TransportError,
    UnsafeActionError,
    UnsupportedContentTypeError,
    VLAClientError,
    WorkerStartError,
)
from vla_client.observation import Observation
from vla_client.protocol import ActionMetadata, DecodedRequest, decode_request, encode_request

__version__ = "0.1.0"

__all__ = [
    "ActionClient",
    "ActionMetadata",
    "ActionResult",
    "AsyncActionClient",
    "CameraError",
    "CameraTimeoutError",
    "CodecError",
    "ConnectError",
    "ContractError",
    "DeadlineExceededError",
    "DecodedRequest",
    "InferenceError",
    "InvalidObservationError",
    "MismatchedReplyError",
    "Observation",
    "PayloadTooLargeError",
    "ProtocolError",
    "RecordingError",
    "RequestTimeoutError",
    "ServerError",
    "ServerSilentError",
    "StaleFrameError",
    "StaleObservationError",
    "Timings",
    "TransportError",
    "UnsafeActionError",
    "UnsupportedContentTypeError",
    "VLAClientError",
    "WorkerStartError",
    "decode_request",
    "encode_request",
    "mismatched_cameras",
]

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
    CodecError,
    ConnectError,
    InvalidObservationError,
    PayloadTooLargeError,
    ProtocolError,
    RequestTimeoutError,
    ServerError,
    TransportError,
    UnsupportedContentTypeError,
    VLAClientError,
)
from vla_client.observation import Observation
from vla_client.protocol import ActionMetadata, DecodedRequest, decode_request, encode_request

__version__ = "0.1.0"

__all__ = [
    "ActionClient",
    "ActionMetadata",
    "ActionResult",
    "AsyncActionClient",
    "CodecError",
    "ConnectError",
    "DecodedRequest",
    "InvalidObservationError",
    "Observation",
    "PayloadTooLargeError",
    "ProtocolError",
    "RequestTimeoutError",
    "ServerError",
    "Timings",
    "TransportError",
    "UnsupportedContentTypeError",
    "VLAClientError",
    "decode_request",
    "encode_request",
    "mismatched_cameras",
]

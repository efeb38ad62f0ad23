"""The action API's wire protocol: typed documents, request encode/decode, reply build/read.

Shared by client and server; knows nothing of either.
"""

from vla_client.protocol.image_forms import (
    ENCODINGS,
    Encoding,
    decode_image_value,
    encode_image_value,
)
from vla_client.protocol.models import (
    ActionEnvelope,
    ActionInput,
    ActionMetadata,
    ActionRawResponse,
    ActionRequest,
    ObservationPayload,
    RuntimeOptions,
    SamplingParameters,
)
from vla_client.protocol.request import (
    DecodedRequest,
    DecodeLimits,
    build_request,
    decode_payload,
    decode_request,
    encode_request,
)
from vla_client.protocol.response import build_envelope, build_raw, new_request_id, read_actions
from vla_client.protocol.wire import (
    CONTENT_TYPES,
    JSON_CONTENT_TYPE,
    MSGPACK_CONTENT_TYPE,
    WIRES,
    Wire,
    dumps,
    loads,
    wants_msgpack,
    wire_for_content_type,
)

__all__ = [
    "CONTENT_TYPES",
    "ENCODINGS",
    "JSON_CONTENT_TYPE",
    "MSGPACK_CONTENT_TYPE",
    "WIRES",
    "ActionEnvelope",
    "ActionInput",
    "ActionMetadata",
    "ActionRawResponse",
    "ActionRequest",
    "DecodeLimits",
    "DecodedRequest",
    "Encoding",
    "ObservationPayload",
    "RuntimeOptions",
    "SamplingParameters",
    "Wire",
    "build_envelope",
    "build_raw",
    "build_request",
    "decode_image_value",
    "decode_payload",
    "decode_request",
    "dumps",
    "encode_image_value",
    "encode_request",
    "loads",
    "new_request_id",
    "read_actions",
    "wants_msgpack",
    "wire_for_content_type",
]

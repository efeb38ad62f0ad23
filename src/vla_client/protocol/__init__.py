"""The action API's wire protocol: where it lives, what its documents look like, how failures
travel. Shared by client and server; knows nothing of either. What only the server reads or
writes (decoding requests, building replies) is `vla_client.server.wire`.

- `endpoints`: the paths, websocket URLs and API-key headers;
- `wire`: bodies as JSON or msgpack, by content type;
- `image_forms`: the forms an image takes on the wire, to and from a frame;
- `request`: building and encoding requests on the robot;
- `layouts`: the openpi observation layouts (flat, DROID, LIBERO, ALOHA);
- `limits`: how much one request may make its reader decode (`DecodeLimits`);
- `reply_read`: reading replies (the server builds them in `vla_client.server.wire`);
- `status`: failures as HTTP statuses and websocket close codes, both ways;
- `models`: typed request and metadata documents;
- `metadata_fields`: how each metadata field is read and bounded, for the metadata model;
- `families`: the documents of the server families the client talks to but the reference
  server does not speak (GR00T, vLLM-Omni, RoboArena); their two names a robot's code calls,
  `flat_state` and `declare_rtc`, are offered here too.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.protocol.endpoints import ENDPOINT_PATHS as ENDPOINT_PATHS
    from vla_client.protocol.endpoints import ENDPOINTS as ENDPOINTS
    from vla_client.protocol.endpoints import GENERATIONS_PATH as GENERATIONS_PATH
    from vla_client.protocol.endpoints import HEALTH_PATH as HEALTH_PATH
    from vla_client.protocol.endpoints import METADATA_PATH as METADATA_PATH
    from vla_client.protocol.endpoints import OPENPI_ROOT_PATH as OPENPI_ROOT_PATH
    from vla_client.protocol.endpoints import Endpoint as Endpoint
    from vla_client.protocol.endpoints import auth_headers as auth_headers
    from vla_client.protocol.endpoints import check_endpoint as check_endpoint
    from vla_client.protocol.endpoints import websocket_url as websocket_url
    from vla_client.protocol.families.gr00t import flat_state as flat_state
    from vla_client.protocol.families.gr00t_rtc import declare_rtc as declare_rtc
    from vla_client.protocol.image_forms import ENCODINGS as ENCODINGS
    from vla_client.protocol.image_forms import Encoding as Encoding
    from vla_client.protocol.image_forms import encode_depth_value as encode_depth_value
    from vla_client.protocol.image_forms import encode_image_value as encode_image_value
    from vla_client.protocol.layouts import ALOHA as ALOHA
    from vla_client.protocol.layouts import DROID as DROID
    from vla_client.protocol.layouts import FLAT as FLAT
    from vla_client.protocol.layouts import LAYOUTS as LAYOUTS
    from vla_client.protocol.layouts import LIBERO as LIBERO
    from vla_client.protocol.layouts import LayoutFunction as LayoutFunction
    from vla_client.protocol.layouts import OpenpiLayout as OpenpiLayout
    from vla_client.protocol.layouts import StatePart as StatePart
    from vla_client.protocol.layouts import openpi_layout as openpi_layout
    from vla_client.protocol.limits import DecodeLimits as DecodeLimits
    from vla_client.protocol.metadata_fields import check_metadata_bounds as check_metadata_bounds
    from vla_client.protocol.models import ActionInput as ActionInput
    from vla_client.protocol.models import ActionMetadata as ActionMetadata
    from vla_client.protocol.models import ActionRequest as ActionRequest
    from vla_client.protocol.models import ObservationPayload as ObservationPayload
    from vla_client.protocol.models import RuntimeOptions as RuntimeOptions
    from vla_client.protocol.models import SamplingParameters as SamplingParameters
    from vla_client.protocol.models import new_request_id as new_request_id
    from vla_client.protocol.models import read_metadata as read_metadata
    from vla_client.protocol.reply_read import REPLY_SIZE_FLOOR as REPLY_SIZE_FLOOR
    from vla_client.protocol.reply_read import Reply as Reply
    from vla_client.protocol.reply_read import read_actions as read_actions
    from vla_client.protocol.reply_read import read_reply as read_reply
    from vla_client.protocol.reply_read import reply_size_limit as reply_size_limit
    from vla_client.protocol.request import build_openpi_request as build_openpi_request
    from vla_client.protocol.request import build_request as build_request
    from vla_client.protocol.request import encode_request as encode_request
    from vla_client.protocol.status import ErrorStatus as ErrorStatus
    from vla_client.protocol.status import error_status as error_status
    from vla_client.protocol.status import status_from_close as status_from_close
    from vla_client.protocol.wire import CONTENT_TYPES as CONTENT_TYPES
    from vla_client.protocol.wire import JSON_CONTENT_TYPE as JSON_CONTENT_TYPE
    from vla_client.protocol.wire import MSGPACK_CONTENT_TYPE as MSGPACK_CONTENT_TYPE
    from vla_client.protocol.wire import WIRES as WIRES
    from vla_client.protocol.wire import Wire as Wire
    from vla_client.protocol.wire import dumps as dumps
    from vla_client.protocol.wire import loads as loads
    from vla_client.protocol.wire import wants_msgpack as wants_msgpack
    from vla_client.protocol.wire import wire_for_content_type as wire_for_content_type

# What `lazy_face` hands out: each name of the block above, from the same module.
_FACE = {
    "DecodeLimits": "vla_client.protocol.limits",
    "ENDPOINT_PATHS": "vla_client.protocol.endpoints",
    "ENDPOINTS": "vla_client.protocol.endpoints",
    "GENERATIONS_PATH": "vla_client.protocol.endpoints",
    "HEALTH_PATH": "vla_client.protocol.endpoints",
    "METADATA_PATH": "vla_client.protocol.endpoints",
    "OPENPI_ROOT_PATH": "vla_client.protocol.endpoints",
    "Endpoint": "vla_client.protocol.endpoints",
    "auth_headers": "vla_client.protocol.endpoints",
    "check_endpoint": "vla_client.protocol.endpoints",
    "websocket_url": "vla_client.protocol.endpoints",
    "flat_state": "vla_client.protocol.families.gr00t",
    "declare_rtc": "vla_client.protocol.families.gr00t_rtc",
    "ENCODINGS": "vla_client.protocol.image_forms",
    "Encoding": "vla_client.protocol.image_forms",
    "encode_depth_value": "vla_client.protocol.image_forms",
    "encode_image_value": "vla_client.protocol.image_forms",
    "ALOHA": "vla_client.protocol.layouts",
    "DROID": "vla_client.protocol.layouts",
    "FLAT": "vla_client.protocol.layouts",
    "LAYOUTS": "vla_client.protocol.layouts",
    "LIBERO": "vla_client.protocol.layouts",
    "LayoutFunction": "vla_client.protocol.layouts",
    "OpenpiLayout": "vla_client.protocol.layouts",
    "StatePart": "vla_client.protocol.layouts",
    "openpi_layout": "vla_client.protocol.layouts",
    "check_metadata_bounds": "vla_client.protocol.metadata_fields",
    "ActionInput": "vla_client.protocol.models",
    "ActionMetadata": "vla_client.protocol.models",
    "ActionRequest": "vla_client.protocol.models",
    "ObservationPayload": "vla_client.protocol.models",
    "RuntimeOptions": "vla_client.protocol.models",
    "SamplingParameters": "vla_client.protocol.models",
    "read_metadata": "vla_client.protocol.models",
    "new_request_id": "vla_client.protocol.models",
    "build_openpi_request": "vla_client.protocol.request",
    "build_request": "vla_client.protocol.request",
    "encode_request": "vla_client.protocol.request",
    "Reply": "vla_client.protocol.reply_read",
    "read_actions": "vla_client.protocol.reply_read",
    "read_reply": "vla_client.protocol.reply_read",
    "REPLY_SIZE_FLOOR": "vla_client.protocol.reply_read",
    "reply_size_limit": "vla_client.protocol.reply_read",
    "ErrorStatus": "vla_client.protocol.status",
    "error_status": "vla_client.protocol.status",
    "status_from_close": "vla_client.protocol.status",
    "CONTENT_TYPES": "vla_client.protocol.wire",
    "JSON_CONTENT_TYPE": "vla_client.protocol.wire",
    "MSGPACK_CONTENT_TYPE": "vla_client.protocol.wire",
    "WIRES": "vla_client.protocol.wire",
    "Wire": "vla_client.protocol.wire",
    "dumps": "vla_client.protocol.wire",
    "loads": "vla_client.protocol.wire",
    "wants_msgpack": "vla_client.protocol.wire",
    "wire_for_content_type": "vla_client.protocol.wire",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)

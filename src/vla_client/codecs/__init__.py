"""Codecs shared by the client and the server: image payloads, msgpack with numpy, base64.

Nothing here knows about HTTP, the client or the server; both sides import these functions so
that what one side encodes the other decodes with the same code.
"""

from vla_client.codecs.arrays import pixel_list_to_array, tensor_payload_to_array
from vla_client.codecs.b64 import b64decode_text, b64encode_text
from vla_client.codecs.digest import frame_digest
from vla_client.codecs.frames import as_rgb_frame
from vla_client.codecs.images import (
    DEFAULT_JPEG_QUALITY,
    DEFAULT_MAX_PIXELS,
    decode_image_bytes,
    encode_jpeg,
    encode_png,
    map_frames,
)
from vla_client.codecs.msgpack_numpy import packb, unpackb

__all__ = [
    "DEFAULT_JPEG_QUALITY",
    "DEFAULT_MAX_PIXELS",
    "as_rgb_frame",
    "b64decode_text",
    "b64encode_text",
    "decode_image_bytes",
    "encode_jpeg",
    "encode_png",
    "frame_digest",
    "map_frames",
    "packb",
    "pixel_list_to_array",
    "tensor_payload_to_array",
    "unpackb",
]

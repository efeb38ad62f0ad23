"""Codecs shared by the client and the server: image payloads, msgpack with numpy, base64.

Nothing here knows about HTTP, the client or the server; both sides import these functions so
that what one side encodes the other decodes with the same code.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.codecs.arrays import pixel_list_to_array as pixel_list_to_array
    from vla_client.codecs.arrays import tensor_payload_to_array as tensor_payload_to_array
    from vla_client.codecs.b64 import b64decode_text as b64decode_text
    from vla_client.codecs.b64 import b64encode_text as b64encode_text
    from vla_client.codecs.depth import as_depth_frame as as_depth_frame
    from vla_client.codecs.digest import frame_digest as frame_digest
    from vla_client.codecs.frames import as_rgb_frame as as_rgb_frame
    from vla_client.codecs.image_decode import DEFAULT_MAX_PIXELS as DEFAULT_MAX_PIXELS
    from vla_client.codecs.image_decode import decode_image_bytes as decode_image_bytes
    from vla_client.codecs.image_encode import DEFAULT_JPEG_QUALITY as DEFAULT_JPEG_QUALITY
    from vla_client.codecs.image_encode import encode_jpeg as encode_jpeg
    from vla_client.codecs.image_encode import encode_png as encode_png
    from vla_client.codecs.msgpack_numpy import packb as packb
    from vla_client.codecs.msgpack_numpy import unpackb as unpackb
    from vla_client.codecs.parallel import map_frames as map_frames

# What `lazy_face` hands out: each name of the block above, from the same module.
_FACE = {
    "pixel_list_to_array": "vla_client.codecs.arrays",
    "tensor_payload_to_array": "vla_client.codecs.arrays",
    "b64decode_text": "vla_client.codecs.b64",
    "b64encode_text": "vla_client.codecs.b64",
    "as_depth_frame": "vla_client.codecs.depth",
    "frame_digest": "vla_client.codecs.digest",
    "as_rgb_frame": "vla_client.codecs.frames",
    "decode_image_bytes": "vla_client.codecs.image_decode",
    "DEFAULT_MAX_PIXELS": "vla_client.codecs.image_decode",
    "DEFAULT_JPEG_QUALITY": "vla_client.codecs.image_encode",
    "encode_jpeg": "vla_client.codecs.image_encode",
    "encode_png": "vla_client.codecs.image_encode",
    "packb": "vla_client.codecs.msgpack_numpy",
    "unpackb": "vla_client.codecs.msgpack_numpy",
    "map_frames": "vla_client.codecs.parallel",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)

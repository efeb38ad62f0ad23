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
    from vla_client.codecs.digest import frame_digest as frame_digest
    from vla_client.codecs.frames import as_rgb_frame as as_rgb_frame
    from vla_client.codecs.images import DEFAULT_JPEG_QUALITY as DEFAULT_JPEG_QUALITY
    from vla_client.codecs.images import DEFAULT_MAX_PIXELS as DEFAULT_MAX_PIXELS
    from vla_client.codecs.images import decode_image_bytes as decode_image_bytes
    from vla_client.codecs.images import encode_jpeg as encode_jpeg
    from vla_client.codecs.images import encode_png as encode_png
    from vla_client.codecs.images import map_frames as map_frames
    from vla_client.codecs.msgpack_numpy import packb as packb
    from vla_client.codecs.msgpack_numpy import unpackb as unpackb

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)

"""One image value on the wire, in every form the action API allows, to and from a frame.

The forms SGLang's action API takes: ``{"b64_json": ...}`` / ``{"base64": ...}`` holding PNG, JPEG
or anything Pillow reads, optionally as a ``data:`` URL; nested pixel lists; tensor payloads
``{values|data, dtype, shape}``; and, on msgpack, ndarrays (plus raw encoded image bytes, an
extension). Whatever arrives leaves `decode_image_value` as a C-contiguous HxWx3 uint8 RGB
array, or as a `CodecError` that names the field.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from vla_client.codecs.arrays import pixel_list_to_array, tensor_payload_to_array
from vla_client.codecs.b64 import b64decode_text, b64encode_text
from vla_client.codecs.frames import as_rgb_frame
from vla_client.codecs.images import (
    DEFAULT_JPEG_QUALITY,
    DEFAULT_MAX_PIXELS,
    decode_image_bytes,
    encode_jpeg,
)
from vla_client.codecs.pixel_msgpack import nested_list_msgpack
from vla_client.codecs.pixel_text import flat_list_text, nested_list_text
from vla_client.codecs.png_write import encode_png
from vla_client.codecs.pre_encoded import PreEncoded
from vla_client.errors import CodecError, PayloadTooLargeError
from vla_client.protocol.wire import Wire, loads

Encoding = Literal["png", "jpeg", "raw", "pixels"]
ENCODINGS: tuple[Encoding, ...] = ("png", "jpeg", "raw", "pixels")


def encode_image_value(
    frame: np.ndarray, encoding: Encoding, wire: Wire, *, jpeg_quality: int = DEFAULT_JPEG_QUALITY
) -> Any:
    """The wire value for one HxWx3 uint8 RGB frame.

    - ``png`` / ``jpeg``: ``{"b64_json": <base64>}`` on either wire (what SGLang decodes).
    - ``raw``: the ndarray itself on msgpack; on JSON a tensor payload with a flat value list
      (accepted by SGLang, but four bytes a value: prefer msgpack for raw frames).
    - ``pixels``: ``frame.tolist()`` in meaning, for servers that know nothing else.

    Value lists are written by numpy, not built as Python ints, and come back as `PreEncoded`
    bytes that `dumps` splices into the document (as lists with fixed-width numbers in JSON, as
    exactly ``msgpack.packb(frame.tolist())`` in msgpack).
    """
    if encoding == "png":
        return {"b64_json": b64encode_text(encode_png(frame))}
    if encoding == "jpeg":
        return {"b64_json": b64encode_text(encode_jpeg(frame, jpeg_quality))}
    if encoding == "raw":
        if wire == "msgpack":
            return frame
        values = PreEncoded(flat_list_text(frame), "json")
        return {"values": values, "dtype": "uint8", "shape": list(frame.shape)}
    if encoding == "pixels":
        if wire == "msgpack":
            return PreEncoded(nested_list_msgpack(frame), "msgpack")
        return PreEncoded(nested_list_text(frame), "json")
    raise CodecError(f"unknown image encoding {encoding!r}; choose one of {', '.join(ENCODINGS)}")


def decode_image_value(
    value: Any, *, field: str | None = None, max_pixels: int = DEFAULT_MAX_PIXELS
) -> np.ndarray:
    """Decode any accepted image form to a C-contiguous HxWx3 uint8 RGB array."""
    if isinstance(value, PreEncoded):
        return decode_image_value(loads(value.data, value.wire), field=field, max_pixels=max_pixels)
    if isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, dict):
        encoded = value.get("b64_json")
        if encoded is None:
            encoded = value.get("base64")
        if encoded is not None or "b64_json" in value or "base64" in value:
            data = b64decode_text(encoded if encoded is not None else "", field=field)
            return decode_image_bytes(data, max_pixels=max_pixels, field=field)
        if value.get("values") is None and value.get("data") is None:
            raise CodecError(
                "unrecognised image payload: expected b64_json, base64, values or data",
                field=field,
            )
        array = tensor_payload_to_array(value, field=field)
    elif isinstance(value, list | tuple):
        converted = pixel_list_to_array(value)
        if not isinstance(converted, np.ndarray):
            raise CodecError(
                "pixel list is ragged, non-numeric or not [H][W][C] nested lists", field=field
            )
        array = converted
    elif isinstance(value, bytes | bytearray | memoryview):
        return decode_image_bytes(bytes(value), max_pixels=max_pixels, field=field)
    elif isinstance(value, str):
        raise CodecError(
            "image is a string; send {'b64_json': ...}, pixels or an array "
            "(the server does not open paths or URLs)",
            field=field,
        )
    else:
        raise CodecError(f"unsupported image value of type {type(value).__name__}", field=field)
    _check_array_pixels(array, max_pixels, field)
    return as_rgb_frame(array, field=field)


def _check_array_pixels(array: np.ndarray, max_pixels: int, field: str | None) -> None:
    pixels = array.shape[0] * array.shape[1] if array.ndim >= 2 else array.size
    if pixels > max_pixels:
        raise PayloadTooLargeError(
            f"image has {pixels} pixels, over the limit of {max_pixels}", field=field
        )

"""One frame to an image value on the wire, in the form a client chose (its `Encoding`).

The forms SGLang's action API takes: ``{"b64_json": ...}`` / ``{"base64": ...}`` holding PNG, JPEG
or anything Pillow reads, optionally as a ``data:`` URL; nested pixel lists; tensor payloads
``{values|data, dtype, shape}``; and, on msgpack, ndarrays (plus raw encoded image bytes, an
extension). This module writes them on the robot; the server reads every one of them with
`vla_client.server.wire.decode.decode_image_value`, in a module of its own so that a robot never
loads the decoders.

Depth frames (`vla_client.codecs.depth`) have forms of their own, `encode_depth_value`: only the
encodings that carry them exactly.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from vla_client.codecs.b64 import b64encode_text
from vla_client.codecs.depth import encode_depth_png
from vla_client.codecs.image_encode import DEFAULT_JPEG_QUALITY, encode_jpeg, encode_png
from vla_client.codecs.pixel_msgpack import nested_list_msgpack
from vla_client.codecs.pixel_text import flat_list_text, nested_list_text
from vla_client.codecs.png_write import png_writer_holds_gil
from vla_client.codecs.pre_encoded import PreEncoded
from vla_client.errors import CodecError
from vla_client.protocol.wire import Wire

Encoding = Literal["png", "jpeg", "raw", "pixels"]
ENCODINGS: tuple[Encoding, ...] = ("png", "jpeg", "raw", "pixels")
DEPTH_ENCODINGS = {"uint16": ("raw", "png"), "float32": ("raw",)}
"""The encodings that carry a depth frame of each dtype exactly."""


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


def encode_depth_value(frame: np.ndarray, encoding: Encoding, wire: Wire) -> Any:
    """The wire value for one depth frame (HxW uint16 or float32), carried exactly or refused.

    - ``raw``: the ndarray itself on msgpack; on JSON a tensor payload ``{values, dtype,
      shape}`` for uint16 (float32 is refused there: JSON has no NaN, which depth cameras use
      for unknown pixels).
    - ``png``: uint16 as a 16-bit grey PNG, ``{"b64_json": <base64>}``; float32 is refused.
    - ``jpeg``, ``pixels``: refused (JPEG is lossy and 8-bit, a pixel list has no dtype).

    A refusal is a `CodecError` naming the encodings that carry the frame: a depth frame is
    never converted to fit an encoding.
    """
    dtype = frame.dtype.name
    carried = DEPTH_ENCODINGS.get(dtype, ())
    if encoding not in carried:
        names = " or ".join(f'encoding="{name}"' for name in carried)
        raise CodecError(
            f"a {dtype} depth frame cannot travel as {encoding!r}; send it with {names}"
        )
    if encoding == "png":
        return {"b64_json": b64encode_text(encode_depth_png(frame))}
    if wire == "msgpack":
        return frame
    if dtype == "float32":
        raise CodecError(
            'float32 depth travels raw on wire="msgpack" only (JSON has no NaN); '
            "or send uint16 millimetres"
        )
    return {"values": frame.reshape(-1), "dtype": dtype, "shape": list(frame.shape)}


def encodes_in_parallel(encoding: Encoding, wire: Wire) -> bool:
    """Whether several frames encode faster in `map_frames`' threads than one after another.

    Threads pay only where the encoder releases the GIL: OpenCV's PNG and JPEG writers and the
    numpy that writes value lists do. Two cases gain nothing: raw frames on msgpack are their own
    wire value (the packer writes their buffers), and fpng's binding holds the GIL while it
    writes, so its frames take turns anyway and the hop to the pool and back is a loss
    (3 cameras 360x640 on 2 cores: 2.3 ms in the pool, 2.0 ms one after another).
    """
    if encoding == "raw":
        return wire != "msgpack"
    return encoding != "png" or not png_writer_holds_gil()

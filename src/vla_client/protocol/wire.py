"""Bodies on the wire: JSON (orjson) or msgpack with numpy arrays, chosen by content type.

Content negotiation follows SGLang: a content type containing ``msgpack`` means msgpack; JSON is
``application/json``, ``text/plain``, any ``+json`` type, or no content type at all. Anything else
(images, multipart forms, octet streams) is refused with `UnsupportedContentTypeError`.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

import orjson

from vla_client.codecs import msgpack_numpy
from vla_client.codecs.pixel_json import extract_pixel_lists, restore_placeholders
from vla_client.codecs.pre_encoded import PreEncoded
from vla_client.errors import CodecError, UnsupportedContentTypeError

Wire = Literal["json", "msgpack"]
WIRES: tuple[Wire, ...] = ("json", "msgpack")
JSON_CONTENT_TYPE = "application/json"
MSGPACK_CONTENT_TYPE = msgpack_numpy.CONTENT_TYPE
_PIXEL_SCAN_MIN_BYTES = 64 * 1024
CONTENT_TYPES: dict[Wire, str] = {"json": JSON_CONTENT_TYPE, "msgpack": MSGPACK_CONTENT_TYPE}


def wire_for_content_type(content_type: str | None) -> Wire:
    """Which wire a request body uses, from its Content-Type header."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if "msgpack" in media:
        return "msgpack"
    if media in ("", JSON_CONTENT_TYPE, "text/plain", "text/json") or media.endswith("+json"):
        return "json"
    raise UnsupportedContentTypeError(
        f"unsupported content type {media!r}; send application/json or application/msgpack"
    )


def wants_msgpack(content_type: str | None, accept: str | None) -> bool:
    """SGLang's rule: a msgpack request, or an Accept header naming msgpack, gets msgpack back."""
    return "msgpack" in (content_type or "").lower() or "msgpack" in (accept or "").lower()


def dumps(payload: Any, wire: Wire) -> bytes:
    """Serialise a document; numpy arrays become lists in JSON and arrays in msgpack.

    `PreEncoded` values (pixel lists written by numpy) go in byte for byte.
    """
    if wire == "msgpack":
        return msgpack_numpy.packb(payload)
    try:
        return orjson.dumps(payload, default=_fragment, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError as exc:
        raise CodecError(f"cannot serialise to JSON: {exc}") from None


def _fragment(value: Any) -> orjson.Fragment:
    if isinstance(value, PreEncoded) and value.wire == "json":
        return orjson.Fragment(value.data)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def loads(body: bytes | memoryview, wire: Wire, *, base64_bytes: bool = False) -> Any:
    """Parse a body; raises `CodecError` for malformed JSON or msgpack.

    JSON bodies that carry pixel lists (``image.tolist()``, or a tensor payload's flat
    ``values``) take a fast path: the lists are cut out of the raw bytes as uint8 arrays before
    parsing, so millions of Python ints are never built; what is left is a small document.
    Irregular lists stay in the body and reach `pixel_list_to_array` or
    `tensor_payload_to_array` like any other value. With `base64_bytes` (request decoding) the
    long strings of ``b64_json`` / ``base64`` members come back as their ASCII bytes, which the
    base64 decoder reads as it reads the text (`vla_client.codecs.pixel_json`).
    """
    if wire == "msgpack":
        return msgpack_numpy.unpackb(body)
    if isinstance(body, memoryview):
        body = body.tobytes()
    arrays: dict[str, Any] = {}
    if len(body) > _PIXEL_SCAN_MIN_BYTES:
        body, arrays = extract_pixel_lists(body, base64=base64_bytes)
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        field = _non_finite_field(body)
        if field is not None:
            raise CodecError(NOT_FINITE, field=field) from None
        raise CodecError(f"malformed JSON body: {exc}") from None
    return restore_placeholders(document, arrays)


NOT_FINITE = (
    "not a finite number (NaN, infinity or beyond a double's range), which JSON cannot carry"
)


def _non_finite_field(body: bytes) -> str | None:
    """Where a body orjson refused holds ``NaN``, ``Infinity`` or a number too large for a
    double (``1e999``), as Python's lenient parser reads it, as a dotted path
    (``input.observation.capture_times.wrist``); None when that is not why it was refused.
    Only a refused body is parsed again, so a good one costs nothing more."""
    try:
        document = json.loads(body, parse_constant=float)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{path}.{key}" if path else str(key), v) for key, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{path}.{i}" if path else str(i), v) for i, v in enumerate(value))
        elif _non_finite_number(value):
            return path
    return None


def _non_finite_number(value: Any) -> bool:
    """Whether `value` is a number but not a finite double (an integer beyond a double's
    range is not one either)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return not math.isfinite(value)
    except OverflowError:  # an integer beyond a double's range
        return True

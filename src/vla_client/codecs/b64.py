"""Base64 for image payloads: fast (pybase64, SIMD) and strict.

SGLang accepts ``{"b64_json": s}`` with or without a ``data:image/png;base64,`` prefix; so do we.
Decoding validates the alphabet, so corrupt text fails here with a clear error instead of
producing garbage bytes that fail later inside an image decoder.
"""

from __future__ import annotations

import binascii

import pybase64

from vla_client.errors import CodecError


def b64encode_text(data: bytes | memoryview) -> str:
    """Standard base64 as ASCII text, for JSON."""
    return pybase64.b64encode(data).decode("ascii")


def b64decode_text(text: str | bytes, *, field: str | None = None) -> bytes:
    """Decode base64 text, dropping a ``data:<mime>;base64,`` URL prefix when present."""
    if isinstance(text, str):
        if text.startswith("data:") and "," in text:
            text = text.split(",", 1)[1]
        try:
            raw = text.encode("ascii")
        except UnicodeEncodeError:
            raise CodecError("base64 text has non-ASCII characters", field=field) from None
    elif isinstance(text, bytes | bytearray | memoryview):
        raw = bytes(text)
        if raw.startswith(b"data:") and b"," in raw:
            raw = raw.split(b",", 1)[1]
    else:
        raise CodecError(f"base64 payload must be a string, got {type(text).__name__}", field=field)
    if not raw:
        raise CodecError("image payload requires b64_json (empty string)", field=field)
    try:
        return pybase64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CodecError(f"invalid base64: {exc}", field=field) from None

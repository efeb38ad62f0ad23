"""Base64 image strings cut from a JSON request body before it is parsed: the same pixels and
the same refusals as when the JSON parser reads them, and nothing else taken."""

from __future__ import annotations

import json

import numpy as np
import orjson
import pytest

from vla_client.cameras.scene import synthetic_frames
from vla_client.codecs import b64encode_text, encode_png
from vla_client.codecs.pixel_json import extract_pixel_lists, restore_placeholders
from vla_client.errors import CodecError
from vla_client.protocol import loads
from vla_client.server.wire.decode import decode_request

FRAMES = synthetic_frames(2, 360, 640)  # bodies over the size the search starts at


def _body(images: dict[str, object], *, dumps=orjson.dumps) -> bytes:
    return dumps({"input": {"task": "t", "observation": {"images": images}}})


def _b64(frame: np.ndarray) -> str:
    return b64encode_text(encode_png(frame))


def test_request_images_read_from_the_body_are_the_frames_sent() -> None:
    images = {name: {"b64_json": _b64(frame)} for name, frame in FRAMES.items()}
    for dumps in (orjson.dumps, lambda doc: json.dumps(doc, indent=2).encode()):
        body = _body(images, dumps=dumps)
        decoded = decode_request(body, "application/json")
        for name, frame in FRAMES.items():
            np.testing.assert_array_equal(decoded.images[name], frame)


def test_strings_are_taken_as_their_bytes_only_for_base64_keys() -> None:
    text = _b64(next(iter(FRAMES.values())))
    body = orjson.dumps({"b64_json": text, "base64": text, "task": text, "note": {"data": text}})
    stripped, values = extract_pixel_lists(body, base64=True)
    assert sorted(values.values()) == [text.encode()] * 2
    document = restore_placeholders(orjson.loads(stripped), values)
    assert document == {"b64_json": text.encode(), "base64": text.encode(), "task": text,
                        "note": {"data": text}}  # fmt: skip
    assert loads(body, "json") == orjson.loads(body)  # not asked for: strings stay strings
    assert extract_pixel_lists(body) == (body, {})


def test_a_string_with_an_escape_is_left_to_the_parser() -> None:
    frame = next(iter(FRAMES.values()))
    text = _b64(frame)
    slash = text.index("/") if "/" in text else None
    assert slash is not None  # a PNG of this size has a "/" in its base64
    body = _body({"cam": {"b64_json": text}}).replace(b"/", b"\\/")
    assert extract_pixel_lists(body, base64=True)[1] == {}
    np.testing.assert_array_equal(decode_request(body, "application/json").images["cam"], frame)


@pytest.mark.parametrize("inside", [b"\x01", "é".encode(), b"\xff", b"*", b"\t"])
def test_a_string_the_parser_or_base64_refuses_is_still_refused(inside) -> None:
    """A control character or invalid UTF-8 was the JSON parser's to refuse; cut from the body,
    the base64 decoder refuses it, naming the camera: a 400 either way, never pixels."""
    text = _b64(next(iter(FRAMES.values()))).encode()
    body = _body({"cam": {"b64_json": "PLACE"}}).replace(b"PLACE", text[:100] + inside + text[100:])
    with pytest.raises(CodecError, match="invalid base64") as caught:
        decode_request(body, "application/json")
    assert caught.value.field is not None and "cam" in caught.value.field


def test_an_unterminated_string_is_malformed_json() -> None:
    body = _body({"cam": {"b64_json": "PLACE"}}).replace(b'PLACE"}}}}', b"A" * 70_000)
    with pytest.raises(CodecError, match="malformed JSON"):
        decode_request(body, "application/json")

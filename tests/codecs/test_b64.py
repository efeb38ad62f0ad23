"""Base64 for image payloads: standard alphabet, data: URLs, strict refusals naming the field."""

from __future__ import annotations

import base64

import pytest

from vla_client.codecs import b64decode_text, b64encode_text
from vla_client.errors import CodecError

DATA = bytes(range(256)) * 3


def test_encoding_is_standard_base64_text() -> None:
    text = b64encode_text(DATA)
    assert isinstance(text, str) and text == base64.b64encode(DATA).decode("ascii")
    assert b64encode_text(memoryview(DATA)) == text
    assert b64encode_text(b"\xfb\xff") == "+/8="  # the standard alphabet, with padding


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(DATA).decode(),
        "data:image/png;base64," + base64.b64encode(DATA).decode(),
        "data:," + base64.b64encode(DATA).decode(),
        base64.b64encode(DATA),
        b"data:image/png;base64," + base64.b64encode(DATA),
        bytearray(base64.b64encode(DATA)),
        memoryview(base64.b64encode(DATA)),
    ],
    ids=["str", "data-url", "bare-data-url", "bytes", "bytes-data-url", "bytearray", "memoryview"],
)
def test_decoding_takes_text_bytes_and_data_urls(text: str | bytes) -> None:
    decoded = b64decode_text(text)
    assert type(decoded) is bytes and decoded == DATA


@pytest.mark.parametrize(
    "text", ["data:,QUJD,REVG", b"data:,QUJD,REVG", "data:a,b,QUJD", b"QUJD,REVG"]
)
def test_only_the_first_comma_of_a_data_url_ends_its_prefix(text: str | bytes) -> None:
    """What follows the first comma is the payload, whole: a comma there is not base64."""
    with pytest.raises(CodecError, match="invalid base64"):
        b64decode_text(text)


def test_a_data_prefix_without_a_comma_is_not_a_url() -> None:
    with pytest.raises(CodecError, match="invalid base64"):
        b64decode_text("data:AAAA")  # ':' is not in the alphabet
    assert b64decode_text("ZGF0YQ==") == b"data"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "image payload requires b64_json (empty string)"),
        (b"", "image payload requires b64_json (empty string)"),
        ("data:image/png;base64,", "image payload requires b64_json (empty string)"),
        ("aGVsbG8=!", "invalid base64: "),
        ("aGVsbG8", "invalid base64: "),
        ("aGVs bG8=", "invalid base64: "),
        ("aGVsbG8=é", "base64 text has non-ASCII characters"),
        (3, "base64 payload must be a string, got int"),
        (None, "base64 payload must be a string, got NoneType"),
    ],
)
def test_bad_base64_is_refused_naming_the_field(text: object, message: str) -> None:
    with pytest.raises(CodecError) as caught:
        b64decode_text(text, field="input.observation.images.wrist")  # type: ignore[arg-type]
    assert caught.value.field == "input.observation.images.wrist"
    assert str(caught.value).startswith(f"input.observation.images.wrist: {message}")
    with pytest.raises(CodecError) as unnamed:
        b64decode_text(text)  # type: ignore[arg-type]
    assert unnamed.value.field is None and str(unnamed.value).startswith(message)

"""`decode_image_value` one value at a time: each form it takes, and for each malformed one the
exact message and `field` the server's 400 (or 413) carries.

The round trips with the encoder are in test_image_forms.py; here the values are written out
by hand, so a message or a field that goes missing on one path shows.
"""

from __future__ import annotations

import io
import json

import msgpack
import numpy as np
import pytest
from PIL import Image

from vla_client.codecs.b64 import b64encode_text
from vla_client.codecs.pre_encoded import PreEncoded
from vla_client.errors import CodecError, PayloadTooLargeError
from vla_client.server.wire.decode import decode_image_value

WHERE = "input.observation.images.wrist"
RED = np.array([[[255, 0, 0]]], np.uint8)


def png_bytes(frame: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="PNG")
    return buffer.getvalue()


def refused(value: object, **kwargs: object) -> CodecError:
    with pytest.raises(CodecError) as caught:
        decode_image_value(value, field=WHERE, **kwargs)  # type: ignore[arg-type]
    assert caught.value.field == WHERE
    return caught.value


# Values written for a wire ahead of time (PreEncoded).


@pytest.mark.parametrize(
    "value",
    [PreEncoded(json.dumps(RED.tolist()).encode(), "json"),
     PreEncoded(msgpack.packb(RED.tolist()), "msgpack")],
)  # fmt: skip
def test_a_pre_encoded_value_is_read_on_its_wire_and_decoded(value):
    np.testing.assert_array_equal(decode_image_value(value), RED)


def test_a_pre_encoded_value_keeps_the_field_and_the_pixel_limit():
    error = refused(PreEncoded(b'"frame.png"', "json"))
    assert str(error).startswith(f"{WHERE}: image is a string")
    four = PreEncoded(json.dumps(np.zeros((2, 2, 3), np.uint8).tolist()).encode(), "json")
    assert decode_image_value(four, max_pixels=4).shape == (2, 2, 3)
    error = refused(four, max_pixels=3)
    assert isinstance(error, PayloadTooLargeError)
    assert str(error) == f"{WHERE}: image has 4 pixels, over the limit of 3"


# Pixel lists, bytes, strings and other types.


def test_a_ragged_pixel_list_is_refused_with_what_a_pixel_list_must_be():
    error = refused([[[1, 2, 3], [4, 5]]])
    assert str(error) == (
        f"{WHERE}: pixel list is ragged, non-numeric or not [H][W][C] nested lists"
    )


def test_a_pixel_list_with_two_channels_names_its_field():
    error = refused([[[1, 2]]])
    assert str(error) == f"{WHERE}: image must have 1, 3 or 4 channels, got 2"


def test_image_bytes_keep_the_pixel_limit():
    data = png_bytes(np.zeros((2, 3, 3), np.uint8))
    assert decode_image_value(data, max_pixels=6).shape == (2, 3, 3)
    assert isinstance(refused(data, max_pixels=5), PayloadTooLargeError)


def test_a_string_is_refused_with_what_to_send_instead():
    assert str(refused("/tmp/frame.png")) == (
        f"{WHERE}: image is a string; send {{'b64_json': ...}}, pixels or an array "
        "(the server does not open paths or URLs)"
    )


def test_a_value_of_another_type_is_refused_by_its_type_name():
    assert str(refused(42)) == f"{WHERE}: unsupported image value of type int"


# Maps: base64 or a tensor payload.


@pytest.mark.parametrize("value", [{"b64_json": None}, {"base64": None}, {"b64_json": ""}])
def test_a_base64_key_without_text_is_an_empty_base64_payload(value):
    assert str(refused(value)) == f"{WHERE}: image payload requires b64_json (empty string)"


def test_base64_images_keep_the_pixel_limit():
    value = {"base64": b64encode_text(png_bytes(np.zeros((2, 3, 3), np.uint8)))}
    assert decode_image_value(value, max_pixels=6).shape == (2, 3, 3)
    assert isinstance(refused(value, max_pixels=5), PayloadTooLargeError)


@pytest.mark.parametrize("key", ["values", "data"])
def test_a_tensor_payload_is_read_from_values_or_data(key):
    value = {key: [255, 0, 0], "dtype": "uint8", "shape": [1, 1, 3]}
    np.testing.assert_array_equal(decode_image_value(value), RED)


def test_a_map_of_none_of_the_image_keys_is_refused_with_the_keys_it_takes():
    assert str(refused({"url": "http://x", "values": None, "data": None})) == (
        f"{WHERE}: unrecognised image payload: expected b64_json, base64, values or data"
    )


def test_a_bad_tensor_payload_names_its_field():
    error = refused({"values": [1, 2], "dtype": "uint8", "shape": [1, 1, 2]})
    assert str(error) == f"{WHERE}: image must have 1, 3 or 4 channels, got 2"
    assert refused({"values": [1, 2], "dtype": "uint8", "shape": [3]}).field == WHERE


# Arrays and the pixel limit.


def test_an_array_with_two_channels_names_its_field():
    assert str(refused(np.zeros((2, 2, 2), np.uint8))) == (
        f"{WHERE}: image must have 1, 3 or 4 channels, got 2"
    )


@pytest.mark.parametrize("shape", [(2, 8, 3), (8, 2, 3), (2, 8), (2, 8, 1)])
def test_the_pixel_limit_counts_height_times_width_whatever_the_channels(shape):
    """16 pixels: taken at a limit of 16, refused at 15, in either orientation."""
    array = np.zeros(shape, np.uint8)
    assert decode_image_value(array, max_pixels=16).shape == (*shape[:2], 3)
    error = refused(array, max_pixels=15)
    assert isinstance(error, PayloadTooLargeError)
    assert str(error) == f"{WHERE}: image has 16 pixels, over the limit of 15"


def test_a_one_dimensional_array_is_counted_by_its_size_then_refused_as_no_image():
    error = refused(np.zeros(16, np.uint8), max_pixels=15)
    assert isinstance(error, PayloadTooLargeError)
    assert str(error) == f"{WHERE}: image has 16 pixels, over the limit of 15"
    error = refused(np.zeros(16, np.uint8), max_pixels=16)
    assert not isinstance(error, PayloadTooLargeError)
    assert str(error) == f"{WHERE}: image must be HxWxC, got shape (16,)"

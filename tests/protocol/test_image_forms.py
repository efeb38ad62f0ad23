import json

import msgpack
import numpy as np
import pytest

from vla_client.codecs import b64encode_text, encode_png
from vla_client.codecs.pre_encoded import PreEncoded
from vla_client.errors import CodecError, PayloadTooLargeError
from vla_client.protocol import ENCODINGS, dumps, encode_image_value, loads
from vla_client.server.wire.decode import decode_image_value


@pytest.mark.parametrize("encoding", [e for e in ENCODINGS if e != "jpeg"])
@pytest.mark.parametrize("wire", ["json", "msgpack"])
def test_lossless_encodings_round_trip(frames, encoding, wire):
    frame = frames["right"]
    value = loads(dumps(encode_image_value(frame, encoding, wire), wire), wire)
    np.testing.assert_array_equal(decode_image_value(value), frame)


@pytest.mark.parametrize("wire", ["json", "msgpack"])
def test_pixel_lists_are_written_without_python_ints_but_read_as_tolist(frames, wire):
    frame = frames["right"]
    value = encode_image_value(frame, "pixels", wire)
    assert isinstance(value, PreEncoded)
    np.testing.assert_array_equal(decode_image_value(value), frame)
    reader = json.loads if wire == "json" else msgpack.unpackb
    assert reader(value.data) == frame.tolist()
    raw = encode_image_value(frame, "raw", "json")
    assert json.loads(dumps(raw, "json")) == {
        "values": frame.ravel().tolist(),
        "dtype": "uint8",
        "shape": list(frame.shape),
    }


def test_every_b64_spelling_is_accepted(frames):
    frame = frames["wrist"]
    text = b64encode_text(encode_png(frame))
    for value in (
        {"b64_json": text},
        {"base64": text},
        {"b64_json": "data:image/png;base64," + text},
    ):
        np.testing.assert_array_equal(decode_image_value(value), frame)


def test_decoded_frames_are_c_contiguous_uint8_rgb():
    chw_sliced = np.zeros((8, 10, 4), np.uint8)[:, ::2, :]
    out = decode_image_value(chw_sliced)
    assert out.shape == (8, 5, 3) and out.flags.c_contiguous and out.dtype == np.uint8


def test_float_pixels_in_unit_range_are_scaled():
    out = decode_image_value([[[0.0, 0.5, 1.0]]])
    assert out.tolist() == [[[0, 128, 255]]]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"b64_json": "!!!not base64!!!"}, "invalid base64"),
        ({"b64_json": ""}, "requires b64_json"),
        ({"b64_json": b64encode_text(b"\x89PNG\r\n\x1a\n" + b"\0" * 30)}, "PNG"),
        ([[[1, 2, 3], [4, 5]]], "ragged"),
        ([[["a", "b", "c"]]], "non-numeric"),
        ([[[256, 0, 0]]], "0..255"),
        ([[[1.5, 0.0, 0.0]]], r"\[0, 1\]"),
        (np.zeros((3, 32, 32), np.uint8), "CHW"),
        (np.zeros((4, 4, 2), np.uint8), "channels"),
        ("/tmp/frame.png", "string"),
        ({"url": "http://x"}, "unrecognised"),
        (42, "unsupported"),
    ],
)
def test_bad_image_values_name_the_problem(value, message):
    with pytest.raises(CodecError, match=message) as info:
        decode_image_value(value, field="input.observation.images.wrist")
    assert info.value.field == "input.observation.images.wrist"
    assert "input.observation.images.wrist" in str(info.value)


def test_pixel_limit_applies_to_arrays_and_lists():
    with pytest.raises(PayloadTooLargeError):
        decode_image_value(np.zeros((100, 100, 3), np.uint8), max_pixels=5000)
    with pytest.raises(PayloadTooLargeError):
        decode_image_value(np.zeros((100, 100, 3), np.uint8).tolist(), max_pixels=5000)

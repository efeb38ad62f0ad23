"""SGLang's pixel-list outcome table (contract section 7), row by row."""

import json

import numpy as np
import pytest

from vla_client.codecs import pixel_list_to_array, tensor_payload_to_array
from vla_client.errors import CodecError


def test_uint8_image_tolist_becomes_read_only_uint8():
    image = np.arange(18, dtype=np.uint8).reshape(2, 3, 3)
    out = pixel_list_to_array(image.tolist())
    assert out.dtype == np.uint8 and out.shape == (2, 3, 3) and not out.flags.writeable
    np.testing.assert_array_equal(out, image)


@pytest.mark.parametrize(
    ("value", "dtype", "shape"),
    [
        ([[[1], [2]], [[3], [4]]], np.uint8, (2, 2, 1)),
        ([[[1, 2, 3, 4]]], np.uint8, (1, 1, 4)),
        ((((1, 2, 3),),), np.uint8, (1, 1, 3)),
        ([[[0.5, 0.25, 1.0]]], np.float64, (1, 1, 3)),
        ([[[0.5, 2, 3]]], np.float64, (1, 1, 3)),
        ([[[1, 2.5, 3]]], np.float64, (1, 1, 3)),
        ([[[256, 0, 0]]], np.int64, (1, 1, 3)),
        ([[[-1, 0, 0]]], np.int64, (1, 1, 3)),
        ([[[1, True, 0]]], np.uint8, (1, 1, 3)),
    ],
)
def test_numeric_rows(value, dtype, shape):
    out = pixel_list_to_array(value)
    assert isinstance(out, np.ndarray) and out.dtype == dtype and out.shape == shape


def test_nan_among_floats_stays_float64():
    out = pixel_list_to_array(json.loads("[[[NaN, 1.0, 2.0]]]"))
    assert out.dtype == np.float64 and np.isnan(out[0, 0, 0])


@pytest.mark.parametrize(
    "value",
    [
        [[[2**70, 1, 2]]],
        [[[True, False, True]]],
        [[[1, 2, 3], [4, 5, 6]], [[7, 8, 9]]],
        [[[1, 2, 3], [4, 5]]],
        [[[0.1, 0.2], [0.3]]],
        [[["a", "b", "c"]]],
        [[[1, "2", 3]]],
        [[[None, 1, 2]]],
        [[[1, 2, 3], [4, 5, [6]]]],
        [[1, 2, 3], [4, 5, 6]],
        [1, 2, 3],
        [],
        [[]],
        [np.zeros((2, 2, 3), np.uint8).tolist()] * 2,
        {"b64_json": "x"},
    ],
)
def test_irregular_values_are_returned_unchanged(value):
    assert pixel_list_to_array(value) is value


def test_tensor_payload_with_values_dtype_and_shape():
    out = tensor_payload_to_array({"values": list(range(6)), "dtype": "uint8", "shape": [1, 2, 3]})
    assert out.dtype == np.uint8 and out.shape == (1, 2, 3)
    np.testing.assert_array_equal(out.ravel(), range(6))


def test_tensor_payload_data_key_and_float_values():
    out = tensor_payload_to_array({"data": [[0.5, 1.5]], "dtype": "float32"})
    assert out.dtype == np.float32 and out.shape == (1, 2)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"values": [1, 2, 3], "shape": [2, 2]}, "reshape"),
        ({"values": [1, 2], "dtype": "bogus"}, "unknown dtype"),
        ({"values": [1, 2], "dtype": "object"}, "not numeric"),
        ({"values": [[1, 2], [3]]}, "ragged"),
        ({"values": ["a", "b"]}, "numeric"),
        ({"values": [300], "dtype": "uint8"}, "out of range"),
        ({"shape": [1]}, "values"),
    ],
)
def test_bad_tensor_payloads(payload, message):
    with pytest.raises(CodecError, match=message):
        tensor_payload_to_array(payload)


def test_ragged_pixels_with_the_right_total_are_returned_unchanged():
    """Eight values in 2x2 pixels of 2, but spread 2, 3, 1, 2: not an image, as numpy agrees."""
    value = [[[1, 2], [3, 4, 5]], [[6], [7, 8]]]
    with pytest.raises(ValueError):
        np.asarray(value)
    assert pixel_list_to_array(value) is value


def test_tensor_values_as_bytes_or_uint8_array_keep_their_values():
    raw = np.arange(6, dtype=np.float32)
    out = tensor_payload_to_array({"values": raw.tobytes(), "dtype": "float32", "shape": [2, 3]})
    np.testing.assert_array_equal(out, raw.reshape(2, 3))
    out = tensor_payload_to_array({"values": bytes([1, 2, 255])})  # no dtype: bytes are uint8
    assert out.dtype == np.uint8 and out.tolist() == [1, 2, 255]
    as_read = np.array([1, 2, 200], dtype=np.uint8)  # how the JSON reader hands over int lists
    out = tensor_payload_to_array({"values": as_read, "dtype": "float32"})
    assert out.dtype == np.float32 and out.tolist() == [1.0, 2.0, 200.0]
    out = tensor_payload_to_array({"values": as_read})
    assert out.dtype == np.int_ and out.tolist() == [1, 2, 200]  # as a list of JSON ints
    eight = [0, 7, 255, 1, 2, 3, 4, 5]  # eight bytes: as many as one float64 would take
    out = tensor_payload_to_array({"values": eight, "dtype": "uint8"})
    assert out.dtype == np.uint8 and out.tolist() == eight
    out = tensor_payload_to_array({"values": [1.0, 2.0], "dtype": "uint8"})
    assert out.dtype == np.uint8 and out.tolist() == [1, 2]


def test_int_lists_read_as_uint8_are_cast_to_a_narrower_dtype_only_where_each_value_fits():
    # The JSON reader hands an int list over as uint8; a declared int8 takes 127 as a list of
    # JSON ints would, and refuses 128 rather than wrap it to -128.
    fits = tensor_payload_to_array({"values": np.array([0, 127], np.uint8), "dtype": "int8"})
    assert fits.dtype == np.int8 and fits.tolist() == [0, 127]
    with pytest.raises(CodecError) as refused:
        tensor_payload_to_array({"values": np.array([5, 128], np.uint8), "dtype": "int8"})
    assert str(refused.value) == (
        "tensor values are ragged, non-numeric or out of range: 128 is out of bounds for int8"
    )
    empty = tensor_payload_to_array({"values": np.array([], np.uint8), "dtype": "int8"})
    assert empty.dtype == np.int8 and empty.size == 0


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"shape": [1]}, "tensor payload needs 'values' or 'data'"),
        ({"values": [1], "dtype": 5}, "dtype must be a string, got 5"),
        ({"values": [1], "dtype": "bogus"}, "unknown dtype 'bogus'"),
        ({"values": [1], "dtype": "U4"}, "dtype 'U4' is not numeric"),
        ({"values": ["a"]}, "tensor values must be numeric, got <U1"),
        ({"values": [[1], [2, 3]]}, "tensor values are ragged, non-numeric or out of range: "),
        ({"values": [1, 2], "shape": 2}, "tensor shape must be a list of ints, got 2"),
        (
            {"values": [1, 2], "shape": [True, 2]},
            r"tensor shape must be a list of ints, got \[True",
        ),
        ({"values": [1, 2], "shape": [2.0]}, r"tensor shape must be a list of ints, got \[2.0\]"),
        ({"values": [1, 2, 3], "shape": [2, 2]}, r"cannot reshape 3 values to shape \[2, 2\]"),
    ],
)
def test_bad_tensor_payloads_name_the_field(payload, message):
    with pytest.raises(CodecError, match=f"^images.cam: {message}") as caught:
        tensor_payload_to_array(payload, field="images.cam")
    assert caught.value.field == "images.cam"

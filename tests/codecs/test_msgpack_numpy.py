import msgpack
import numpy as np
import pytest

from vla_client.codecs import packb, unpackb
from vla_client.errors import CodecError


@pytest.mark.parametrize(
    "dtype", ["uint8", "int16", "int64", "float16", "float32", "float64", "bool"]
)
def test_arrays_round_trip(dtype):
    array = (np.arange(24).reshape(2, 3, 4) % 2).astype(dtype)
    out = unpackb(packb({"a": array}))["a"]
    assert out.dtype == array.dtype and out.shape == array.shape
    np.testing.assert_array_equal(out, array)


def test_unpacked_arrays_are_read_only_views():
    out = unpackb(packb(np.zeros((4, 4), np.uint8)))
    assert not out.flags.writeable


def test_non_contiguous_arrays_pack_in_c_order():
    array = np.arange(12).reshape(3, 4).T
    np.testing.assert_array_equal(unpackb(packb(array)), array)


def test_numpy_scalars_round_trip():
    value = unpackb(packb({"x": np.float32(1.5)}))["x"]
    assert isinstance(value, np.float32) and value == 1.5


def test_wire_format_is_openpis():
    packed = msgpack.unpackb(packb(np.ones(2, np.float32)), raw=False)
    assert packed[b"__ndarray__"] is True
    assert packed[b"dtype"] == "<f4" and packed[b"shape"] == [2]


def test_str_keys_from_other_languages_are_read():
    body = msgpack.packb(
        {
            "__ndarray__": True,
            "data": np.arange(3, dtype="<i4").tobytes(),
            "dtype": "<i4",
            "shape": [3],
        },
        use_bin_type=True,
    )
    np.testing.assert_array_equal(unpackb(body), [0, 1, 2])


@pytest.mark.parametrize(
    "array", [np.array([object()]), np.zeros(2, np.complex64), np.zeros(2, "V4")]
)
def test_unsafe_dtypes_are_refused_when_packing(array):
    with pytest.raises(CodecError, match="Unsupported dtype"):
        packb(array)


@pytest.mark.parametrize("dtype", ["|O", "<c8", "|V4", "bogus"])
def test_unsafe_or_unknown_dtypes_are_refused_when_unpacking(dtype):
    body = msgpack.packb(
        {b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": dtype, b"shape": [1]},
        use_bin_type=True,
    )
    with pytest.raises(CodecError):
        unpackb(body)


def test_data_length_must_match_shape():
    body = msgpack.packb(
        {b"__ndarray__": True, b"data": b"\0" * 5, b"dtype": "|u1", b"shape": [2, 3]},
        use_bin_type=True,
    )
    with pytest.raises(CodecError, match="needs 6"):
        unpackb(body)


def test_malformed_msgpack_is_a_codec_error():
    with pytest.raises(CodecError):
        unpackb(b"\xc1\xc1\xc1")
    with pytest.raises(CodecError):
        unpackb(packb({"a": 1})[:-1])

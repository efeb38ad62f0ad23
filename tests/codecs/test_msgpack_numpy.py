import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vla_client.codecs import packb, unpackb
from vla_client.codecs.msgpack_numpy import VIEW_MIN_BYTES, _pack_default, _unpack_hook
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


@pytest.mark.parametrize("where", ["alone", "in a big body"])
@pytest.mark.parametrize("extra", [-1, 0, 1], ids=["one-short", "exact", "one-trailing-byte"])
def test_data_length_must_match_shape_exactly(where, extra):
    """Short data and trailing bytes after an array's data are refused; exact data is read.

    "in a big body" the array sits in a map of a body over `VIEW_MIN_BYTES`, where its data is
    a view sliced out of the body rather than a copy msgpack made.
    """
    rows = 2 if where == "alone" else VIEW_MIN_BYTES // 3 + 1
    needed = rows * 3
    data = bytes(range(256)) * (needed // 256 + 1)
    ndarray = {b"__ndarray__": True, b"data": data[: needed + extra], b"dtype": "|u1",
               b"shape": [rows, 3]}  # fmt: skip
    document = ndarray if where == "alone" else {"input": {"images": {"cam": ndarray}}}
    body = msgpack.packb(document, use_bin_type=True)
    assert (len(body) >= VIEW_MIN_BYTES) is (where != "alone")
    if extra:
        with pytest.raises(CodecError, match=f"has {needed + extra} bytes.* needs {needed}"):
            unpackb(body)
        return
    out = unpackb(body)
    array = out if where == "alone" else out["input"]["images"]["cam"]
    assert array.shape == (rows, 3)
    assert array.tobytes() == data[:needed]


@pytest.mark.parametrize("document", [{"a": np.arange(3)}, np.arange(3)], ids=["map", "array"])
def test_trailing_bytes_after_a_small_document_are_refused(document):
    body = packb(document)
    assert len(body) < VIEW_MIN_BYTES
    unpackb(body)  # whole, it is read
    with pytest.raises(CodecError, match="malformed msgpack"):
        unpackb(body + b"\x00")


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, {"nested": [2**70]}])
def test_ints_msgpack_cannot_carry_are_a_codec_error(value):
    with pytest.raises(CodecError, match="cannot pack to msgpack"):
        packb({"parameters": {"seed": value}})


def test_malformed_msgpack_is_a_codec_error():
    with pytest.raises(CodecError):
        unpackb(b"\xc1\xc1\xc1")
    with pytest.raises(CodecError):
        unpackb(packb({"a": 1})[:-1])


def big_document() -> tuple[dict, dict[str, np.ndarray]]:
    frames = {name: np.full((64, 96, 3), i, np.uint8) for i, name in enumerate("abc")}
    state = np.linspace(-1, 1, 7, dtype=np.float32)
    document = {
        "input": {"observation": {"images": frames, "state": state}, "task": "pick"},
        "parameters": {"seed": 3, "blob": b"x" * (VIEW_MIN_BYTES + 1)},
        "frames_in_a_list": [frames["a"]],
    }
    return document, frames


def test_big_arrays_in_maps_are_views_of_the_input_buffer():
    document, frames = big_document()
    buffer = bytearray(packb(document))
    out = unpackb(memoryview(buffer))
    for name, frame in frames.items():
        image = out["input"]["observation"]["images"][name]
        np.testing.assert_array_equal(image, frame)
        assert np.shares_memory(image, np.frombuffer(buffer, np.uint8))
        assert not image.flags.writeable
    # Small arrays, arrays in lists and other binary values are copies, as msgpack makes them.
    assert not np.shares_memory(
        out["input"]["observation"]["state"], np.frombuffer(buffer, np.uint8)
    )
    assert not np.shares_memory(out["frames_in_a_list"][0], np.frombuffer(buffer, np.uint8))
    assert type(out["parameters"]["blob"]) is bytes and out["parameters"]["seed"] == 3


def test_big_bodies_decode_as_plain_msgpack_would():
    document, _ = big_document()
    body = packb(document)
    plain = msgpack.unpackb(body, object_hook=_unpack_hook, raw=False, strict_map_key=False)
    assert_same(unpackb(body), plain)


def assert_same(left, right):
    assert type(left) is type(right)
    if isinstance(left, dict):
        assert list(left) == list(right)
        for key in left:
            assert_same(left[key], right[key])
    elif isinstance(left, list):
        assert len(left) == len(right)
        for a, b in zip(left, right, strict=True):
            assert_same(a, b)
    elif isinstance(left, np.ndarray):
        assert left.dtype == right.dtype
        np.testing.assert_array_equal(left, right)
    else:
        assert left == right


@pytest.mark.parametrize(
    "damage",
    [
        lambda body: body[:-1],  # truncated inside the last frame
        lambda body: body[: len(body) // 2],
        lambda body: body + b"\x00",  # trailing bytes
        lambda body: b"\x82" + body[1:],  # map header claims fewer entries than follow
        lambda body: b"\xdf\xff\xff\xff\xff" + body[1:],  # and far more
    ],
)
def test_damaged_big_bodies_are_codec_errors(damage):
    document, _ = big_document()
    with pytest.raises(CodecError, match="malformed msgpack"):
        unpackb(damage(packb(document)))


big_binaries = st.integers(0, 3 * VIEW_MIN_BYTES).map(lambda n: bytes(range(256)) * (n // 256))
small_or_big_arrays = hnp.arrays(
    st.sampled_from([np.uint8, np.int32, np.float32]),
    hnp.array_shapes(max_dims=3, max_side=48),
)
leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False),
    st.text(max_size=20), st.binary(max_size=40), big_binaries, small_or_big_arrays,
)  # fmt: skip
documents = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(st.text(max_size=8), st.binary(max_size=8)), children, max_size=5
        ),
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(document=documents)
def test_any_document_decodes_exactly_as_plain_msgpack_decodes_it(document):
    body = packb(document)
    plain = msgpack.unpackb(body, object_hook=_unpack_hook, raw=False, strict_map_key=False)
    assert_same(unpackb(body), plain)
    assert_same(unpackb(bytearray(body)), plain)


@settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(document=documents)
def test_packing_writes_the_bytes_plain_msgpack_writes(document):
    assert packb(document) == msgpack.packb(document, default=_pack_default, use_bin_type=True)

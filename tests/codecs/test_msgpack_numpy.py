import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vla_client.codecs import packb, unpackb
from vla_client.codecs.msgpack_numpy import VIEW_MIN_BYTES, _pack_default, _unpack_hook
from vla_client.codecs.pre_encoded import PreEncoded
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


@pytest.mark.parametrize("shape", [(4, 4), (360, 640, 3)])
@pytest.mark.parametrize("kind", [bytearray, lambda body: memoryview(bytearray(body))])
def test_arrays_of_a_writable_body_are_read_only_too(shape, kind):
    """A small body and a big one (walked as views of the body), handed over writable."""
    out = unpackb(kind(packb({"frame": np.ones(shape, np.uint8)})))["frame"]
    assert out.shape == shape and not out.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        out[0, 0] = 5


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


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=documents)
def test_any_document_decodes_exactly_as_plain_msgpack_decodes_it(document):
    body = packb(document)
    plain = msgpack.unpackb(body, object_hook=_unpack_hook, raw=False, strict_map_key=False)
    assert_same(unpackb(body), plain)
    assert_same(unpackb(bytearray(body)), plain)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=documents)
def test_packing_writes_the_bytes_plain_msgpack_writes(document):
    assert packb(document) == msgpack.packb(document, default=_pack_default, use_bin_type=True)


def shares(array, buffer) -> bool:
    return np.shares_memory(array, np.frombuffer(buffer, np.uint8))


def test_values_nested_too_deep_are_a_codec_error():
    for size in (100, VIEW_MIN_BYTES):  # msgpack reads the one, the walk the other
        body = b"\x81\xa1k" * 3 + b"\x91" * 10_000 + b"\xc0" + b"\xc0" * size
        with pytest.raises(CodecError, match=r"^malformed msgpack body: values nested too deep$"):
            unpackb(body[: len(body) - size] if size == 100 else body)


@pytest.mark.parametrize("size", [10, VIEW_MIN_BYTES], ids=["small", "big"])
def test_maps_with_int_keys_are_read(size):
    """Other languages' msgpack libraries may key maps with ints."""
    body = msgpack.packb({1: {2: b"x" * size}, 3: [{4: "y"}]})
    assert unpackb(body) == {1: {2: b"x" * size}, 3: [{4: "y"}]}


@pytest.mark.parametrize("tail", [b"\x00", b"\x00" * 5])
def test_trailing_bytes_after_a_big_document_are_named(tail):
    body = packb({"a": np.zeros(VIEW_MIN_BYTES, np.uint8)})
    with pytest.raises(CodecError, match=r"^malformed msgpack body: data after the document$"):
        unpackb(body + tail)


def test_trailing_bytes_in_a_body_of_exactly_the_view_size_are_named():
    # 3 bytes of map header and key "a", 3 of bin 16 header, the data, 1 trailing byte.
    body = packb({"a": b"x" * (VIEW_MIN_BYTES - 7)}) + b"\x00"
    assert len(body) == VIEW_MIN_BYTES
    with pytest.raises(CodecError, match=r"^malformed msgpack body: data after the document$"):
        unpackb(body)


def test_a_body_over_msgpacks_default_buffer_limit_is_read():
    """msgpack's Unpacker refuses more than 100 MiB unless told otherwise."""
    frame = np.zeros(100 * 2**20 + 1, np.uint8)
    out = unpackb(packb({"frame": frame}))["frame"]
    assert out.shape == frame.shape


def test_a_big_map_missing_its_last_value_is_truncated():
    body = packb({"a": b"x" * VIEW_MIN_BYTES, "b": 1})
    with pytest.raises(CodecError, match=r"^malformed msgpack body: truncated$"):
        unpackb(body[:-1])


def test_a_big_array_alone_is_a_view_down_to_its_exact_size():
    for array in (np.ones(VIEW_MIN_BYTES, np.uint8), np.ones(VIEW_MIN_BYTES - 1, np.uint8)):
        buffer = bytearray(packb(array))
        out = unpackb(buffer)
        np.testing.assert_array_equal(out, array)
        assert shares(out, buffer) is (array.nbytes >= VIEW_MIN_BYTES)


def test_an_array_with_its_data_last_is_a_view():
    """Clients in other languages may write the data after dtype and shape, at the very end."""
    data = bytes(range(256)) * (VIEW_MIN_BYTES // 256)
    body = bytearray(msgpack.packb({"__ndarray__": True, "dtype": "|u1", "shape": [len(data)],
                                    "data": data}))  # fmt: skip
    out = unpackb(body)
    assert out.tobytes() == data and shares(out, body)


def test_pixel_lists_in_maps_are_read_as_uint8_arrays():
    frame = np.arange(60 * 80 * 3, dtype=np.uint32).reshape(60, 80, 3).astype(np.uint8)
    document = {"images": {"cam": frame.tolist()}, "tail": [[[1, 2, 3]]], "after": "x"}
    out = unpackb(msgpack.packb(document))
    assert out["images"]["cam"].dtype == np.uint8
    np.testing.assert_array_equal(out["images"]["cam"], frame)
    # Small lists near the end of the body, and what follows the frame, are read as they are.
    assert out["tail"] == [[[1, 2, 3]]] and out["after"] == "x"
    single = unpackb(msgpack.packb({"cam": frame.tolist(), "after": 1}))  # a frame at depth 1
    np.testing.assert_array_equal(single["cam"], frame)
    assert single["after"] == 1


def test_a_pixel_list_alone_is_read_as_lists():
    frame = np.full((60, 80, 3), 7, np.uint8)
    assert unpackb(msgpack.packb(frame.tolist())) == frame.tolist()


def test_a_pixel_list_with_exactly_the_view_size_left_is_read_as_an_array():
    """From the list's first byte to the end of the body is exactly VIEW_MIN_BYTES."""
    frame = np.ones((40, 40, 3), np.uint8)
    short = len(msgpack.packb({"a": frame.tolist(), "b": ""}))
    pad = VIEW_MIN_BYTES + 3 - short - 2  # 3: the map's header and key "a"; 2: a str 16 header
    body = msgpack.packb({"a": frame.tolist(), "b": "p" * pad})
    assert len(body) - 3 == VIEW_MIN_BYTES
    out = unpackb(body)
    assert isinstance(out["a"], np.ndarray)
    np.testing.assert_array_equal(out["a"], frame)


def nested(depth: int, value):
    for _ in range(depth):
        value = {"k": value}
    return value


def test_maps_down_to_the_walk_depth_give_views_deeper_ones_copies():
    array = np.ones(VIEW_MIN_BYTES, np.uint8)
    for depth, view in [(1, True), (5, True), (6, False)]:
        buffer = bytearray(packb(nested(depth, array)))
        out = unpackb(buffer)
        for _ in range(depth):
            out = out["k"]
        np.testing.assert_array_equal(out, array)
        assert shares(out, buffer) is view, depth


@pytest.mark.parametrize(("pairs", "view"), [(15, True), (16, True), (256, True), (257, False)])
def test_maps_of_up_to_256_pairs_give_views(pairs, view):
    document = {f"k{i}": i for i in range(pairs - 1)} | {"frame": np.ones(VIEW_MIN_BYTES, "u1")}
    buffer = bytearray(packb(document))
    out = unpackb(buffer)
    assert shares(out["frame"], buffer) is view
    assert [out[f"k{i}"] for i in range(pairs - 1)] == list(range(pairs - 1))


def test_maps_with_a_longer_header_than_needed_are_walked():
    """map 16 and map 32 headers for few pairs: legal, and some encoders write them."""
    for header in (b"\xde\x00\x01", b"\xdf\x00\x00\x00\x01"):
        body = bytearray(header + packb("frame") + packb(np.ones(VIEW_MIN_BYTES, np.uint8)))
        out = unpackb(body)
        assert shares(out["frame"], body) and out["frame"].sum() == VIEW_MIN_BYTES


def test_pre_encoded_msgpack_is_embedded_and_json_refused():
    inner = PreEncoded(msgpack.packb({"x": [1, 2]}), wire="msgpack")
    assert unpackb(packb({"a": inner, "b": 3})) == {"a": {"x": [1, 2]}, "b": 3}
    with pytest.raises(
        CodecError, match=r"^cannot pack to msgpack: a value pre-encoded as JSON cannot go into"
    ):
        packb({"a": PreEncoded(b'{"x": 1}', wire="json")})


class Thing:
    pass


def test_an_object_msgpack_cannot_carry_is_named():
    with pytest.raises(CodecError, match=r"^cannot pack to msgpack: cannot serialize Thing$"):
        packb({"a": Thing()})


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 4)])
def test_empty_arrays_round_trip(shape):
    out = unpackb(packb({"a": np.zeros(shape, np.float32)}))["a"]
    assert out.shape == shape and out.dtype == np.float32


def ndarray_body(**fields) -> bytes:
    return msgpack.packb({"__ndarray__": True, **fields}, use_bin_type=True)


def test_a_dtype_sent_as_binary_is_read():
    body = ndarray_body(data=np.arange(2, dtype="<i4").tobytes(), dtype=b"<i4", shape=[2])
    assert unpackb(body).tolist() == [0, 1]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"data": b"\0" * 4, "dtype": "<i4\xe9", "shape": [1]}, "unknown dtype '<i4\xe9'"),
        ({"data": b"\0" * 4, "dtype": b"<i4\xe9", "shape": [1]}, "unknown dtype '<i4\ufffd'"),
        ({"data": b"\0" * 4, "dtype": 4, "shape": [1]}, "dtype must be a string, got int"),
        ({"data": b"\0" * 4, "dtype": "<i4", "shape": 1}, "shape must be a list of non-neg"),
        ({"data": b"\0" * 4, "dtype": "<i4", "shape": [-1]}, r"non-negative ints, got \[-1\]"),
        ({"data": b"\0" * 8, "dtype": "<i4", "shape": [2.0]}, "non-negative ints, got"),
        ({"data": b"\0" * 1, "dtype": "|u1", "shape": [True]}, "non-negative ints, got"),
        ({"data": "\0" * 4, "dtype": "<i4", "shape": [1]}, "^ndarray data must be binary$"),
    ],
)
def test_bad_ndarray_fields_are_named(fields, message):
    with pytest.raises(CodecError, match=message):
        unpackb(ndarray_body(**fields))


@pytest.mark.parametrize(
    "scalar",
    [
        {"__npgeneric__": True, "data": "many", "dtype": "<i4"},
        {"__npgeneric__": True, "dtype": "<i4"},  # no data: found by the fuzz tests
    ],
    ids=["not-a-number", "no-data"],
)
def test_a_bad_numpy_scalar_is_named(scalar):
    with pytest.raises(CodecError, match=r"^malformed msgpack body: bad numpy scalar: "):
        unpackb(msgpack.packb(scalar))


def test_a_big_binary_alone_is_bytes():
    blob = bytes(range(256)) * (VIEW_MIN_BYTES // 256)
    out = unpackb(packb(blob))
    assert type(out) is bytes and out == blob


def test_packb_writes_the_bytes_openpi_clients_msgpack_writes():
    """msgspec writes what msgpack writes (docs/install.md, "Serialisers"): openpi-client's
    `msgpack_numpy.packb` (msgpack with ``use_bin_type=True``) gives the same bytes."""
    openpi = pytest.importorskip("openpi_client.msgpack_numpy")
    document = {
        "observation/image": np.arange(2 * 4 * 3, dtype=np.uint8).reshape(2, 4, 3),
        "observation/state": np.linspace(-1, 1, 7, dtype=np.float32),
        "prompt": "pick up the cube",
        "steps": 10,
        "scale": 0.5,
        "flags": [True, None],
    }
    assert packb(document) == openpi.packb(document)


def test_the_frames_of_a_big_body_are_never_copied_into_msgpacks_buffer():
    """The unpacker is fed the document a piece at a time and steps over the frames: of three
    360x640 frames (2 MB), it is fed a few kilobytes, and the arrays are the body's bytes."""
    from vla_client.codecs.msgpack_numpy import _Walk

    frames = {f"cam{i}": np.full((360, 640, 3), i, np.uint8) for i in range(3)}
    body = packb({"input": {"task": "t", "observation": {"images": frames}}})
    walk = _Walk(memoryview(body).toreadonly())
    out = walk.document()
    fed = len(body) - walk.stepped_over
    assert fed <= 4 * 4096 and fed < len(body) / 100, fed  # a 4 KB piece per value read, at most
    for name, frame in frames.items():
        image = out["input"]["observation"]["images"][name]
        np.testing.assert_array_equal(image, frame)
        assert np.shares_memory(image, np.frombuffer(body, np.uint8))


@pytest.mark.parametrize("offset", [4000, 4090, 4093, 4096, 4100, 8191, 12_300])
@pytest.mark.parametrize("after", [b"", b"s" * 9000])
def test_values_across_the_pieces_fed_to_msgpack_read_as_plain_msgpack_reads_them(offset, after):
    """A frame that starts inside the first piece fed, or just past it, and a value after it
    longer than the pieces (fed twice as much each time it runs short)."""
    frame = np.arange(VIEW_MIN_BYTES * 2, dtype=np.uint8)
    document = {"a": "x" * offset, "frame": frame, "b": after.decode(), "c": list(range(3000))}
    body = packb(document)
    plain = msgpack.unpackb(body, object_hook=_unpack_hook, raw=False, strict_map_key=False)
    assert_same(unpackb(body), plain)
    for cut in (len(body) - 1, len(body) - 3000, body.index(frame.tobytes()) + 10):
        with pytest.raises(CodecError, match="malformed msgpack"):
            unpackb(body[:cut])


@pytest.mark.parametrize("marker", ["__ndarray__", "__npgeneric__"])
@pytest.mark.parametrize("big", [False, True], ids=["small-body", "big-body"])
def test_a_map_that_only_has_a_marker_key_stays_a_map(marker, big):
    """The markers are `True` where an array or scalar was written; a camera named like one,
    its frame a pixel list or an array, is a camera (the property tests found a
    ``__ndarray__`` camera refused as a broken array)."""
    frame = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    padding = bytes(VIEW_MIN_BYTES if big else 0)
    for value in (frame, frame.tolist(), 7, None):
        document = {"images": {marker: value}, "padding": padding}
        back = unpackb(packb(document))["images"]
        assert list(back) == [marker]
        np.testing.assert_array_equal(back[marker], value)


def test_a_marker_that_is_not_true_does_not_make_an_array():
    body = msgpack.packb({"__ndarray__": 1, "data": b"\x00", "dtype": "|u1", "shape": [1]})
    assert unpackb(body) == {"__ndarray__": 1, "data": b"\x00", "dtype": "|u1", "shape": [1]}


def test_a_body_over_msgpacks_default_buffer_is_read_whole():
    """msgpack's unpacker holds at most 100 MiB unless told otherwise: the walk lets it hold
    the whole body, so a value it must read in one piece (a list, here) may be that big."""
    big = bytes(101 << 20)
    back = unpackb(packb({"a": [big]}))
    assert len(back["a"][0]) == len(big)


def test_a_long_value_is_fed_to_msgpack_in_doubling_pieces():
    """A 1 MB string in a walked body: a few feeds of growing size, not thousands of small ones."""
    from vla_client.codecs.msgpack_numpy import _Walk

    text = "x" * 1_000_000
    body = packb({"input": {"task": text, "frame": np.zeros((360, 640, 3), np.uint8)}})
    walk = _Walk(memoryview(body).toreadonly())

    class Counting:
        feeds = 0

        def __init__(self, unpacker):
            self._unpacker = unpacker

        def feed(self, data):
            Counting.feeds += 1
            self._unpacker.feed(data)

        def __getattr__(self, name):
            return getattr(self._unpacker, name)

    walk.unpacker = Counting(walk.unpacker)
    assert walk.document()["input"]["task"] == text
    assert Counting.feeds <= 12, Counting.feeds  # 4 KB doubling past 1 MB: 9 feeds

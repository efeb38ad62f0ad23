"""Pixel and tensor value lists written and read by numpy: the bytes stay plain JSON / msgpack
that `json.loads`, orjson and `msgpack.unpackb` read to the same ints, and anything irregular is
left to those parsers."""

from __future__ import annotations

import json
from typing import Any

import msgpack
import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vla_client.codecs import packb, unpackb
from vla_client.codecs.flat_numbers import parse_flat_list
from vla_client.codecs.pixel_json import extract_pixel_lists, restore_placeholders
from vla_client.codecs.pixel_msgpack import nested_list_msgpack, read_nested_list
from vla_client.codecs.pixel_text import flat_list_text, nested_list_text, read_nested_list_text
from vla_client.errors import CodecError
from vla_client.server.wire.decode import decode_request

frames = hnp.arrays(
    np.uint8,
    st.tuples(st.integers(1, 9), st.integers(1, 40), st.integers(1, 5)),
    elements=st.integers(0, 255) | st.sampled_from([0, 9, 10, 99, 100, 127, 128, 204, 255]),
)


@settings(max_examples=80, deadline=None)
@given(frame=frames)
def test_written_json_is_what_every_parser_reads_as_tolist(frame: np.ndarray) -> None:
    nested, flat = nested_list_text(frame), flat_list_text(frame)
    for loads in (json.loads, orjson.loads):
        assert loads(nested) == frame.tolist()
        assert loads(flat) == frame.ravel().tolist()


@settings(max_examples=80, deadline=None)
@given(frame=frames)
def test_written_json_is_read_back_by_its_own_reader(frame: np.ndarray) -> None:
    read = read_nested_list_text(nested_list_text(frame))
    assert read is not None and read.dtype == np.uint8
    np.testing.assert_array_equal(read, frame)


@pytest.mark.parametrize(
    "text",
    [
        b"[[[  1, 02,  3]]]",  # a leading zero
        b"[[[  1,  2,  3]],[[  1,  2]]]",  # ragged
        b"[[[  1,  2,256]]]",
        b"[[[  1,  2, -3]]]",
        b"[[[1,2,3]]]",  # not fixed-width: left to the general reader
        b"[[[  1,  2,  3] ]]",
    ],
)
def test_only_the_exact_fixed_width_form_is_read_by_it(text: bytes) -> None:
    assert read_nested_list_text(text) is None


@settings(max_examples=80, deadline=None)
@given(frame=frames)
def test_written_msgpack_is_packb_of_tolist_and_reads_back(frame: np.ndarray) -> None:
    data = nested_list_msgpack(frame)
    assert data == msgpack.packb(frame.tolist())
    found = read_nested_list(data + b"\xc0", 0)  # a value after it: the end is reported
    assert found is not None
    array, end = found
    assert end == len(data) and array.dtype == np.uint8
    np.testing.assert_array_equal(array, frame)


def test_the_fixed_width_records_and_their_size() -> None:
    frame = np.array([[[7, 42, 255], [0, 100, 9]]], np.uint8)
    assert nested_list_text(frame) == b"[[[  7, 42,255],[  0,100,  9]]]"
    assert flat_list_text(frame) == b"[  7, 42,255,  0,100,  9]"
    assert len(flat_list_text(np.zeros(1000, np.uint8))) == 4001


@pytest.mark.parametrize(
    "text",
    [b"[1,2,3]", b"[ 1 , 2 ,3 ]", b"[\n  7,\n  255\n]", b"[0,10,100,255]", b"[  7, 42,255]"],
)
def test_flat_lists_in_any_spacing_are_read(text: bytes) -> None:
    parsed = parse_flat_list(text, 0, len(text))
    assert parsed is not None
    assert parsed[0].tolist() == json.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        b"[1 2]", b"[01]", b"[ 07]", b"[007, 42,255]", b"[256]", b"[299]", b"[1000]", b"[-1]",
        b"[1.0]", b"[1e2]", b"[1,,2]", b"[,1]", b"[1,2,]", b"[]", b"[ 1a]", b"[true]", b"[[1]]",
        b'["1"]', b"[1,\x002]",
    ],
)  # fmt: skip
def test_flat_lists_it_is_not_sure_about_are_left_to_the_parser(text: bytes) -> None:
    assert parse_flat_list(text, 0, len(text)) is None


@pytest.mark.parametrize(
    "data",
    [
        msgpack.packb([[[1, 2, 3]], [[1, 2]]]),  # ragged
        msgpack.packb([[[1, 2, -3]]]),
        msgpack.packb([[[1, 2, 300]]]),
        msgpack.packb([[[1, 2, 3.0]]]),
        msgpack.packb([[[1, 2, True]]]),
        msgpack.packb([[[1, 2, "3"]]]),
        msgpack.packb([[1, 2, 3]]),  # two levels
        msgpack.packb([[[[1, 2, 3]]]]),  # four levels
        msgpack.packb([[[1, 2, 3]]])[:-1],  # truncated
        msgpack.packb([[[1, 2, 200]]])[:-1],  # truncated inside a 0xcc value
        msgpack.packb([[[]]]),
    ],
)
def test_irregular_msgpack_lists_are_left_to_msgpack(data: bytes) -> None:
    assert read_nested_list(data, 0) is None


def test_non_minimal_uint8_values_are_read_as_msgpack_reads_them() -> None:
    data = b"\x91\x91\x93\xcc\x05\x01\xcc\xcc"  # [[[5, 1, 204]]], 5 written as 0xcc 0x05
    found = read_nested_list(data, 0)
    assert found is not None and found[0].tolist() == msgpack.unpackb(data)


def test_msgpack_pixel_lists_in_a_request_come_back_as_arrays() -> None:
    frame = np.random.default_rng(2).integers(0, 256, (80, 128, 3), dtype=np.uint8)
    body = packb({"input": {"observation": {"images": {"wrist": frame.tolist()}}}})
    assert body == msgpack.packb({"input": {"observation": {"images": {"wrist": frame.tolist()}}}})
    wrist = unpackb(body)["input"]["observation"]["images"]["wrist"]
    assert isinstance(wrist, np.ndarray)
    np.testing.assert_array_equal(wrist, frame)
    lists = unpackb(packb({"a": [frame.tolist()]}))["a"]  # inside a list: msgpack's lists
    assert isinstance(lists[0], list) and lists[0] == frame.tolist()


def tensor(values: Any, shape: Any, dtype: str = "uint8") -> dict[str, Any]:
    return {"values": values, "dtype": dtype, "shape": shape}


def body_of(images: dict[str, Any], dumps: Any = orjson.dumps) -> bytes:
    return dumps({"input": {"task": "t", "observation": {"images": images}}})  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "dumps",
    [orjson.dumps, lambda o: json.dumps(o).encode(), lambda o: json.dumps(o, indent=1).encode()],
    ids=["orjson", "json", "json indent"],
)
def test_flat_tensor_values_are_taken_as_arrays(dumps: Any) -> None:
    frame = np.random.default_rng(1).integers(0, 256, (30, 50, 3), dtype=np.uint8)
    body = dumps({"x": {"values": frame.ravel().tolist(), "dtype": "uint8"}, "y": "a:b\\"})
    new, arrays = extract_pixel_lists(body, min_bytes=0)
    assert len(arrays) == 1 and len(new) < 200
    got = restore_placeholders(orjson.loads(new), arrays)
    np.testing.assert_array_equal(got["x"]["values"], frame.ravel())
    assert got["y"] == "a:b\\"


@pytest.mark.parametrize(
    "body",
    [
        b'{"other": [1,2,3,4,5,6,7,8,9,10]}',  # a flat list under another name stays a list
        b'{"k": "\\"values\\": [1,2,3,4,5,6,7,8,9,10]"}',  # inside a string
        b'{"a\\"values": [1,2,3,4,5,6,7,8,9,10]}',  # a name that only ends like one
    ],
)
def test_flat_lists_elsewhere_stay_in_the_body(body: bytes) -> None:
    assert extract_pixel_lists(body, min_bytes=0) == (body, {})


N = 100 * 100 * 3  # big enough for the fast path (a body over 64 KiB)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (tensor([7] * (N - 3), [100, 100, 3]), "reshape"),  # length does not match shape
        (tensor([1, 2, 300] * (N // 3), [100, 100, 3]), "out of range"),  # left to the parser
        (tensor([200] * N, [100, 100, 3], "int8"), "out of"),  # taken, then 200 > int8
        (tensor([1, 2, [3]] * (N // 3), [100, 100, 3]), "ragged"),
        (tensor([1, -2, 3] * (N // 3), [100, 100, 3]), "out of range"),
    ],
)
def test_bad_tensor_values_are_refused_naming_the_camera(value: Any, message: str) -> None:
    with pytest.raises(CodecError, match=message) as info:
        decode_request(body_of({"wrist": value}), "application/json")
    assert info.value.field == "input.observation.images.wrist"


def test_flat_tensor_values_of_several_cameras_decode_exactly() -> None:
    rng = np.random.default_rng(5)
    frames = {f"cam{i}": rng.integers(0, 256, (24, 32, 3), dtype=np.uint8) for i in range(3)}
    for dumps in (orjson.dumps, lambda o: json.dumps(o).encode()):
        images = {k: tensor(f.ravel().tolist(), list(f.shape)) for k, f in frames.items()}
        decoded = decode_request(body_of(images, dumps), "application/json")
        for name, frame in frames.items():
            np.testing.assert_array_equal(decoded.images[name], frame)


@pytest.mark.parametrize("dtype", [None, "uint8", "int8", "int16", "float32", "bool"])
def test_taken_tensor_values_get_the_dtype_the_list_would(dtype: str | None) -> None:
    values = [0, 1, 2, 127] * 5000
    payload = {"values": values, **({"dtype": dtype} if dtype else {})}
    body = orjson.dumps({"t": payload})
    new, arrays = extract_pixel_lists(body)
    assert arrays  # the fast path took the list
    from vla_client.codecs import tensor_payload_to_array

    got = tensor_payload_to_array(restore_placeholders(orjson.loads(new), arrays)["t"])
    want = np.asarray(values, dtype=dtype)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)

"""Fuzzing `decode_request`: whatever arrives, the result is a right decode or a named refusal.

A decode must be right: every frame equals an independent decode (`oracles.independent_frame`,
no OpenCV, no vla_client) of some image value in the body, parsed again with the standard
`json` or `msgpack`. A refusal must be a `CodecError` that says where: its `field`, or the part
of the request named in its message. Anything else (an IndexError, a RecursionError, a
MemoryError from a forged shape) would be a 500 on the server, or worse a hang; the per-example
deadline and the pytest timeout catch those.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import msgpack
import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from oracles import independent_frame
from vla_client.codecs import b64encode_text, encode_png, msgpack_numpy
from vla_client.errors import CodecError
from vla_client.observation import Observation
from vla_client.protocol import DecodeLimits, encode_request
from vla_client.server.wire.decode import DecodedRequest, decode_request

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CONTENT_TYPES = ["application/json", "application/msgpack", None, "text/plain"]
LIMITS = DecodeLimits(max_cameras=4, max_image_pixels=64 * 64)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
    st.integers(min_value=2**64, max_value=2**200),
)  # fmt: skip
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=24,
)
_PNG = encode_png(np.zeros((4, 4, 3), np.uint8))
_KEYS = [
    "input", "observation", "images", "state", "task", "prompt", "image", "runtime",
    "parameters", "request_id", "id", "capture_times", "b64_json", "base64", "values", "data",
    "dtype", "shape", "observation.images.cam", "observation/image", "__ndarray__",
    "__npgeneric__", "response_format", "output_format", "return_digest", "seed",
]  # fmt: skip


@st.composite
def valid_images(draw: st.DrawFn) -> Any:
    """A real image in one of the wire forms: grey, RGB or RGBA; uint8, int16 or float."""
    height, width = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    channels = draw(st.sampled_from([0, 1, 3, 4]))  # 0: a grey HxW array
    shape = (height, width) if channels == 0 else (height, width, channels)
    dtype = draw(st.sampled_from(["uint8", "int16", "float32", "float64"]))
    elements = st.floats(0, 1, width=32) if dtype.startswith("float") else st.integers(0, 255)
    array = draw(hnp.arrays(np.dtype(dtype), shape, elements=elements))
    form = draw(st.sampled_from(["ndarray", "tensor", "pixels", "png"]))
    if form == "png" and channels == 3 and dtype == "uint8":
        return {"b64_json": b64encode_text(encode_png(array))}
    if form == "pixels" and channels:
        return array.tolist()
    if form == "tensor":
        return {"values": array.ravel().tolist(), "dtype": dtype, "shape": list(shape)}
    return array


image_like = st.one_of(
    valid_images(),
    st.fixed_dictionaries({"b64_json": st.sampled_from(["", "!!", "aGVsbG8=", "data:,AAAA"])}),
    st.fixed_dictionaries(
        {"values": json_values, "dtype": st.sampled_from(["uint8", "float32", "object", "V8", 3]),
         "shape": st.lists(st.integers(-2, 2**40), max_size=4)}
    ),
    st.lists(st.lists(st.lists(st.integers(-(2**70), 2**70), max_size=3), max_size=3), max_size=3),
    st.just(_PNG), st.binary(max_size=64),
)  # fmt: skip
request_like = st.recursive(
    st.one_of(scalars, image_like),
    lambda inner: st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5),
    max_leaves=30,
)


WHERE = re.compile(
    r"\b(request|body|msgpack|JSON|ndarray|dtype|parameters\.\w+|runtime\.\w+)\b", re.I
)
"""What a refusal without a `field` must name: the body as a whole or the part that is wrong."""


def _assert_decodes_or_refuses(
    body: bytes, content_type: str | None, expected: dict[str, np.ndarray] | None = None
) -> None:
    """`decode_request` decodes `body` right or refuses it with a named reason.

    With `expected`, the decoded frames must be exactly those; otherwise each must equal an
    independent decode of an image value somewhere in the body.
    """
    try:
        result = decode_request(body, content_type, limits=LIMITS)
    except CodecError as exc:
        assert exc.field or WHERE.search(str(exc)), f"refusal names no field: {exc!r}"
        if exc.field:
            assert str(exc).startswith(f"{exc.field}: ")
        return
    assert isinstance(result, DecodedRequest)
    for frame in result.images.values():
        assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
        assert frame.flags.c_contiguous
    if expected is not None:
        assert set(result.images) == set(expected)
        for name, frame in expected.items():
            np.testing.assert_array_equal(result.images[name], frame)
        return
    candidates = _independent_frames(body, content_type)
    for name, frame in result.images.items():
        assert any(c.shape == frame.shape and np.array_equal(c, frame) for c in candidates), (
            f"camera {name!r}: {frame.shape} frame matches no image value in the body"
        )


def _independent_frames(body: bytes, content_type: str | None) -> list[np.ndarray]:
    """Every value in `body` (parsed with the standard json or msgpack) that is an image."""
    try:
        if content_type == "application/msgpack":
            document = msgpack.unpackb(body, raw=False, strict_map_key=False)
        else:
            document = json.loads(body)
    except (ValueError, msgpack.UnpackException):
        return []
    found, stack = [], [document]
    while stack:
        node = stack.pop()
        frame = independent_frame(node)
        if frame is not None:
            found.append(frame)
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
@SETTINGS
@given(body=st.binary(max_size=256))
def test_any_bytes_decode_or_raise_codec_error(content_type: str | None, body: bytes) -> None:
    _assert_decodes_or_refuses(body, content_type)


def _pack(document: Any) -> bytes:
    return msgpack.packb(document, use_bin_type=True, default=repr)  # type: ignore[no-any-return]


def _json(document: Any) -> bytes:
    return orjson.dumps(document, default=repr, option=orjson.OPT_PASSTHROUGH_SUBCLASS)


@SETTINGS
@given(document=request_like)
def test_structured_garbage_decodes_or_raises_codec_error(document: Any) -> None:
    with contextlib.suppress(OverflowError):  # msgpack cannot pack ints over 64 bits
        _assert_decodes_or_refuses(_pack(document), "application/msgpack")
    try:
        body = _json(document)
    except TypeError:  # orjson refuses ints over 64 bits; send them as text instead
        return
    _assert_decodes_or_refuses(body, "application/json")


@pytest.mark.parametrize("wire", ["json", "msgpack"])
@SETTINGS
@given(value=valid_images())
def test_every_image_form_decodes_to_the_independent_frame(wire: str, value: Any) -> None:
    expected = independent_frame(value)
    assert expected is not None
    document = {"input": {"observation": {"images": {"cam": value}}}}
    if wire == "json":
        if isinstance(value, np.ndarray):
            value = {"values": value.ravel().tolist(), "shape": list(value.shape)}
            document["input"]["observation"]["images"]["cam"] = value
            expected = independent_frame(value)
        _assert_decodes_or_refuses(_json(document), "application/json", {"cam": expected})
    else:
        body = msgpack_numpy.packb(document)
        _assert_decodes_or_refuses(body, "application/msgpack", {"cam": expected})


@SETTINGS
@given(value=json_values, where=st.sampled_from(["images.cam", "state", "capture_times", "task"]))
def test_valid_request_with_one_field_replaced(value: Any, where: str) -> None:
    frame = np.arange(5 * 7 * 3, dtype=np.uint8).reshape(5, 7, 3)
    body, _ = encode_request(Observation({"cam": frame}, state=[1.0]), wire="msgpack")
    document = msgpack.unpackb(body, raw=False)
    target = document["input"] if where == "task" else document["input"]["observation"]
    if where == "images.cam":
        target = target["images"]
    target[where.rsplit(".", 1)[-1]] = value
    try:
        mutated = _pack(document)
    except OverflowError:
        return
    if where == "images.cam":
        replaced = independent_frame(value)
        expected = None if replaced is None else {"cam": replaced}
        _assert_decodes_or_refuses(mutated, "application/msgpack", expected)
    else:
        _assert_decodes_or_refuses(mutated, "application/msgpack", {"cam": frame})


@SETTINGS
@given(
    dtype=st.one_of(
        st.text(max_size=6), st.sampled_from(["<f4", "|u1", "|O", "<c8", "|V4", "<M8", ","])
    ),
    shape=st.lists(st.integers(-1, 2**62), max_size=4),
    data=st.binary(max_size=64),
)
def test_forged_ndarray_maps(dtype: str, shape: list[int], data: bytes) -> None:
    forged = {"__ndarray__": True, "data": data, "dtype": dtype, "shape": shape}
    body = _pack({"input": {"observation": {"images": {"cam": forged}, "state": forged}}})
    frame = independent_frame(forged)
    _assert_decodes_or_refuses(
        body, "application/msgpack", None if frame is None else {"cam": frame}
    )


def test_deeply_nested_json_is_refused_cleanly() -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(CodecError):
        decode_request(body, "application/json")
    nested = b'{"input": {"observation": {"images": {"cam": ' + b"[" * 5000 + b"]" * 5000 + b"}}}}"
    with pytest.raises(CodecError):
        decode_request(nested, "application/json")


@pytest.mark.parametrize("opener", [b"\x91", b"\x81\xa1k"])  # lists, maps
def test_deeply_nested_msgpack_is_refused_cleanly(opener: bytes) -> None:
    nested = opener * 100_000 + b"\xc0"
    with pytest.raises(CodecError):
        decode_request(nested, "application/msgpack")
    # Inside a big map, which is split without msgpack before its values are decoded.
    inside = (
        b"\x82\xa5input" + nested + b"\xa3pad\xc5" + (20_000).to_bytes(2, "big") + bytes(20_000)
    )
    with pytest.raises(CodecError, match="nest"):
        decode_request(inside, "application/msgpack")


def test_huge_integers_in_pixel_lists_are_refused() -> None:
    row = b"[[" + b"1" * 4000 + b",0,0]]"
    body = b'{"input": {"observation": {"images": {"cam": [' + row + b"]}}}}"
    with pytest.raises(CodecError):
        decode_request(body, "application/json")
    big = 2**63 + 5
    document = {"input": {"observation": {"images": {"cam": [[[big, 0, 0]]]}}}}
    with pytest.raises(CodecError):
        decode_request(_pack(document), "application/msgpack")

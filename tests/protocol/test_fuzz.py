"""Fuzzing `decode_request`: whatever arrives, the result is a `DecodedRequest` or a `CodecError`.

Anything else (an IndexError, a RecursionError, a MemoryError from a forged shape) would be a
500 on the server, or worse a hang; the per-example deadline and the pytest timeout catch those.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgpack
import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vla_client.codecs import encode_png
from vla_client.errors import CodecError
from vla_client.observation import Observation
from vla_client.protocol import DecodedRequest, DecodeLimits, decode_request, encode_request

SETTINGS = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
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
image_like = st.one_of(
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


def _assert_decodes_or_refuses(body: bytes, content_type: str | None) -> None:
    try:
        result = decode_request(body, content_type, limits=LIMITS)
    except CodecError:
        return
    assert isinstance(result, DecodedRequest)
    for frame in result.images.values():
        assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3


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


@SETTINGS
@given(value=json_values, where=st.sampled_from(["images.cam", "state", "capture_times", "task"]))
def test_valid_request_with_one_field_replaced(value: Any, where: str) -> None:
    frame = np.full((8, 8, 3), 7, np.uint8)
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
    _assert_decodes_or_refuses(mutated, "application/msgpack")


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
    _assert_decodes_or_refuses(body, "application/msgpack")


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

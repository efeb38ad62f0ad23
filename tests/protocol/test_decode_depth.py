"""Depth frames at the server's entrypoint: `decode_depth_value` for one frame in each form it
takes (uint16 millimetres, float32 metres; array, tensor payload, 16-bit PNG) and each it
refuses, and `decode_payload`'s ``depth`` object: where it is looked for, its limits, and what
a request with some cameras' depth and others' colour becomes.

Every refusal is checked by its exact message and `field`, what the server's 400 or 413 says.
"""

from __future__ import annotations

import io
import json
from typing import Any

import msgpack
import numpy as np
import pytest
from PIL import Image

from vla_client.codecs.b64 import b64encode_text
from vla_client.codecs.depth import encode_depth_png
from vla_client.codecs.pre_encoded import PreEncoded
from vla_client.errors import CodecError, PayloadTooLargeError
from vla_client.protocol import DecodeLimits
from vla_client.server.wire.decode import decode_depth_value, decode_payload

MILLIMETRES = np.arange(6, dtype=np.uint16).reshape(2, 3) * 1000
METRES = np.array([[0.5, np.nan], [np.inf, 2.0]], np.float32)
"""Invalid pixels stay as the camera gave them: NaN and infinity are depth values too."""
RED = np.array([[[255, 0, 0]]], np.uint8)
WHERE = "input.observation.depth.wrist"
ARRAY_FORMS = "a depth frame is an array, a tensor payload with its dtype or a 16-bit PNG"


def refused(value: Any, **kwargs: Any) -> CodecError:
    with pytest.raises(CodecError) as caught:
        decode_depth_value(value, field=WHERE, **kwargs)
    assert caught.value.field == WHERE
    return caught.value


def request_refused(payload: Any, **kwargs: Any) -> CodecError:
    with pytest.raises(CodecError) as caught:
        decode_payload(payload, "msgpack", **kwargs)
    return caught.value


def same_frame(got: np.ndarray, want: np.ndarray) -> bool:
    return got.dtype == want.dtype and got.flags.c_contiguous and got.tobytes() == want.tobytes()


# One frame.


@pytest.mark.parametrize("frame", [MILLIMETRES, METRES], ids=["uint16", "float32"])
def test_an_array_is_taken_in_its_own_dtype_bit_for_bit(frame):
    assert same_frame(decode_depth_value(frame), frame)
    assert same_frame(decode_depth_value(frame[:, :, None]), frame)  # HxWx1


@pytest.mark.parametrize("key", ["values", "data"])
def test_a_tensor_payload_is_read_from_values_or_data(key):
    value = {key: MILLIMETRES.reshape(-1).tolist(), "dtype": "uint16", "shape": [2, 3]}
    assert same_frame(decode_depth_value(value), MILLIMETRES)


@pytest.mark.parametrize("wire", ["json", "msgpack"])
def test_a_pre_encoded_tensor_payload_is_read_on_its_wire(wire):
    document = {"values": MILLIMETRES.reshape(-1).tolist(), "dtype": "uint16", "shape": [2, 3]}
    data = json.dumps(document).encode() if wire == "json" else msgpack.packb(document)
    assert same_frame(decode_depth_value(PreEncoded(data, wire)), MILLIMETRES)


def test_a_bad_tensor_payload_names_its_field():
    error = refused({"values": [1, 2], "dtype": "uint16", "shape": [3]})
    assert str(error) == f"{WHERE}: cannot reshape 2 values to shape [3]"


@pytest.mark.parametrize(
    "wrap", [lambda data: data, lambda data: {"b64_json": b64encode_text(data)},
             lambda data: {"base64": b64encode_text(data)}],
    ids=["bytes", "b64_json", "base64"],
)  # fmt: skip
def test_a_16_bit_png_is_taken_as_bytes_or_base64(wrap):
    assert same_frame(decode_depth_value(wrap(encode_depth_png(MILLIMETRES))), MILLIMETRES)


@pytest.mark.parametrize(
    "value, kind",
    [([[1, 2], [3, 4]], "list"), (None, "NoneType"), ("depth.png", "str"),
     ({"values": None, "data": None, "dtype": "uint16"}, "dict")],
)  # fmt: skip
def test_what_is_no_depth_form_is_refused_with_the_forms_depth_takes(value, kind):
    assert str(refused(value)) == f"{WHERE}: {ARRAY_FORMS}, got {kind}"


@pytest.mark.parametrize("dtype", ["uint8", "float64", "int32"])
def test_another_dtype_is_refused_never_converted(dtype):
    error = refused(MILLIMETRES.astype(dtype))
    assert str(error).startswith(
        f"{WHERE}: depth frames are uint16 (millimetres) or float32 (metres), got {dtype}"
    )


def test_a_colour_frame_or_a_colour_png_is_not_depth():
    assert str(refused(np.zeros((2, 3, 3), np.uint16))) == (
        f"{WHERE}: depth frame must be HxW (or HxWx1), got shape (2, 3, 3)"
    )
    colour_png = {"b64_json": b64encode_text(_rgb_png())}
    assert str(refused(colour_png)) == (
        f"{WHERE}: a depth PNG must be 16-bit grey, got 8-bit colour type 2"
    )


def _rgb_png() -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((2, 3, 3), np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize(
    "form", [lambda frame: frame, lambda frame: frame.reshape(-1)[None, :],
             lambda frame: {"b64_json": b64encode_text(encode_depth_png(frame))}],
    ids=["array", "one-row", "png"],
)  # fmt: skip
def test_the_pixel_limit_takes_six_pixels_at_six_and_refuses_them_at_five(form):
    value = form(MILLIMETRES)
    assert decode_depth_value(value, max_pixels=6).size == 6
    assert isinstance(refused(value, max_pixels=5), PayloadTooLargeError)


def test_an_array_over_the_limit_says_by_how_much():
    assert str(refused(MILLIMETRES, max_pixels=5)) == (
        f"{WHERE}: image has 6 pixels, over the limit of 5"
    )


def test_bad_base64_names_the_field_or_depth_without_one():
    assert refused({"b64_json": "!!"}).field == WHERE
    with pytest.raises(CodecError) as caught:
        decode_depth_value({"b64_json": "!!"})
    assert caught.value.field == "depth"


# The request's depth object.


@pytest.mark.parametrize(
    "payload, where",
    [({"input": {"observation": {"depth": {"wrist": MILLIMETRES}}}}, "input.observation.depth"),
     ({"depth": {"wrist": MILLIMETRES}}, "depth")],
)  # fmt: skip
def test_depth_is_read_under_the_observation_or_a_flat_requests_top_level(payload, where):
    decoded = decode_payload(payload, "msgpack")
    assert list(decoded.depth) == ["wrist"] and same_frame(decoded.depth["wrist"], MILLIMETRES)
    assert decoded.images == {} and decoded.extras == {}
    payload = json.loads(json.dumps(payload, default=lambda frame: 1))  # the frame as a number
    assert str(request_refused(payload)) == f"{where}.wrist: {ARRAY_FORMS}, got int"


def test_a_request_without_depth_has_none():
    decoded = decode_payload({"input": {"observation": {"images": {"wrist": RED}}}}, "msgpack")
    assert decoded.depth == {} and list(decoded.images) == ["wrist"]


def test_each_cameras_depth_and_colour_stand_apart():
    """Depth for a camera that sent no colour, colour for one that sent no depth."""
    observation = {"images": {"front": RED}, "depth": {"wrist": METRES, 3: MILLIMETRES}}
    decoded = decode_payload({"input": {"observation": observation}}, "msgpack")
    assert list(decoded.images) == ["front"] and list(decoded.depth) == ["wrist", "3"]
    assert same_frame(decoded.depth["wrist"], METRES)
    assert same_frame(decoded.depth["3"], MILLIMETRES)


@pytest.mark.parametrize("depth, kind", [([MILLIMETRES], "list"), (MILLIMETRES, "ndarray")])
def test_depth_that_is_not_a_map_is_refused_with_its_field(depth, kind):
    error = request_refused({"input": {"observation": {"depth": depth}}})
    assert str(error) == "input.observation.depth: depth must be an object keyed by camera name"
    assert request_refused({"depth": depth}).field == "depth"


def test_the_camera_limit_takes_as_many_depth_cameras_and_refuses_one_more():
    limits = DecodeLimits(max_cameras=2)
    two = {"a": MILLIMETRES, "b": MILLIMETRES}
    assert len(decode_payload({"depth": two}, "msgpack", limits=limits).depth) == 2
    error = request_refused({"input": {"observation": {"depth": {**two, "c": METRES}}}},
                            limits=limits)  # fmt: skip
    assert isinstance(error, PayloadTooLargeError)
    assert str(error) == "input.observation.depth: 3 depth cameras, over the limit of 2"


def test_the_request_pixel_limit_applies_to_depth():
    limits = DecodeLimits(max_image_pixels=5)
    error = request_refused({"depth": {"wrist": MILLIMETRES}}, limits=limits)
    assert isinstance(error, PayloadTooLargeError)
    assert str(error) == "depth.wrist: image has 6 pixels, over the limit of 5"
    limits = DecodeLimits(max_image_pixels=6)
    assert decode_payload({"depth": {"wrist": MILLIMETRES}}, "msgpack", limits=limits).depth

"""`decode_request` / `decode_payload` field by field: where each value is looked for, what it
becomes, and the exact error (message and `field`) for what is wrong.

Small hand-made documents and tiny frames, each checked against values written out by hand or
made with numpy and Pillow here; the round trips with the encoder are in test_request.py and
the fuzzing in test_fuzz.py.
"""

from __future__ import annotations

import base64
import io
import json
import warnings
from typing import Any

import msgpack
import numpy as np
import pytest
from PIL import Image

from vla_client.codecs import DEFAULT_MAX_PIXELS
from vla_client.errors import CodecError, PayloadTooLargeError
from vla_client.protocol import DecodeLimits
from vla_client.server.wire.decode import decode_payload, decode_request, kept_jpeg

RED = np.array([[[255, 0, 0]]], np.uint8)
"""One red pixel, as the decoder must give it back (1x1x3 uint8)."""


def grey(height: int, width: int, value: int = 9) -> np.ndarray:
    return np.full((height, width), value, np.uint8)


def jpeg_bytes(width: int = 8, height: int = 4, mode: str = "RGB") -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, (width, height), (128, 128, 128) if mode == "RGB" else 128).save(
        buffer, format="JPEG"
    )
    return buffer.getvalue()


def png_bytes(frame: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="PNG")
    return buffer.getvalue()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def nested(observation: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"input": {"observation": observation}, **top}


def refusal(payload: Any, **kwargs: Any) -> CodecError:
    with pytest.raises(CodecError) as caught:
        decode_payload(payload, "msgpack", **kwargs)
    return caught.value


# The document and its blocks.


@pytest.mark.parametrize("payload, kind", [([1], "list"), ("x", "str"), (None, "NoneType")])
def test_a_request_that_is_not_a_map_is_refused_by_its_type(payload, kind):
    assert str(refusal(payload)) == f"request must be a JSON object or msgpack map, got {kind}"


def test_a_request_with_input_is_nested_and_one_without_is_flat():
    assert not decode_payload({"input": {}}, "json").flat
    assert decode_payload({}, "json").flat


@pytest.mark.parametrize(
    "payload, field, message",
    [
        ({"input": [1]}, "input", "input must be an object"),
        ({"input": {"observation": 3}}, "input.observation", "observation must be an object"),
        ({"input": {}, "runtime": [1]}, "runtime", "runtime must be an object"),
        ({"input": {"task": 5}}, "input.task", "task must be a string"),
        ({"prompt": ["a"]}, "input.task", "task must be a string"),
    ],
)
def test_a_block_of_the_wrong_type_is_refused_with_its_field(payload, field, message):
    error = refusal(payload)
    assert error.field == field and str(error) == f"{field}: {message}"


def test_null_blocks_are_empty():
    decoded = decode_payload(
        {"input": {"observation": None}, "parameters": None, "runtime": None}, "json"
    )
    assert decoded.images == {} and decoded.state is None and decoded.task == ""
    assert decoded.runtime.return_timing is True and decoded.parameters.seed is None


def test_a_top_level_return_timing_reaches_the_runtime_unless_the_runtime_sets_it():
    assert not decode_payload({"input": {}, "return_timing": False}, "json").runtime.return_timing
    both = {"input": {}, "return_timing": False, "runtime": {"return_timing": True}}
    assert decode_payload(both, "json").runtime.return_timing is True


def test_a_flat_request_takes_only_the_sampling_keys_as_parameters():
    decoded = decode_payload(
        {"seed": 4, "action_horizon": 6, "output_format": "numpy", "response_format": "raw"},
        "json",
    )
    assert (decoded.parameters.seed, decoded.parameters.action_horizon) == (4, 6)
    assert decoded.output_format == "numpy" and decoded.runtime.response_format == "envelope"
    assert decoded.extras == {"response_format": "raw"}  # the parameters are not extras


def test_the_output_format_is_the_runtimes_then_the_parameters_then_the_wires():
    both = {"input": {}, "runtime": {"output_format": "list"},
            "parameters": {"output_format": "numpy"}}  # fmt: skip
    assert decode_payload(both, "msgpack").output_format == "list"
    assert decode_payload({"input": {}}, "msgpack").output_format == "numpy"
    assert decode_payload({"input": {}}, "json").output_format == "list"


# The task.


@pytest.mark.parametrize(
    "payload, task",
    [
        ({"input": {"task": "a", "prompt": "b"}}, "a"),
        ({"input": {"prompt": "b"}}, "b"),
        ({"input": {"observation": {"prompt": "c"}}}, "c"),
        ({"input": {"observation": {"task": "d"}}}, "d"),
        ({"prompt": "e"}, "e"),
        ({"task": "f"}, "f"),
        ({"prompt": "", "task": "g"}, "g"),
        ({}, ""),
    ],
)
def test_the_task_is_found_where_each_client_puts_it(payload, task):
    decoded = decode_payload(payload, "json")
    assert decoded.task == task and decoded.extras == {}


# Images: where they are found, what they are called, which field an error names.


def test_images_under_images_keep_their_camera_names():
    decoded = decode_payload(nested({"images": {"left": RED, 7: grey(2, 3)}}), "msgpack")
    assert list(decoded.images) == ["left", "7"]
    np.testing.assert_array_equal(decoded.images["left"], RED)
    np.testing.assert_array_equal(decoded.images["7"], np.full((2, 3, 3), 9, np.uint8))


def test_a_bad_image_names_its_field_in_each_layout():
    assert refusal(nested({"images": {"wrist": "x"}})).field == "input.observation.images.wrist"
    assert refusal({"images": {"wrist": "x"}}).field == "images.wrist"
    assert refusal({"observation.images.top": "x"}).field == "observation.images.top"
    assert refusal(nested({"images.top": "x"})).field == "input.observation.images.top"
    assert refusal({"observation/top": {"b64_json": 1}}).field == "observation/top"
    assert refusal({"image": "x"}).field == "image"
    assert refusal(nested({"image": [RED, "x"]})).field == "input.observation.image.1"


def test_images_that_are_not_a_map_are_refused_with_the_field():
    error = refusal(nested({"images": [RED]}))
    assert error.field == "input.observation.images"
    assert str(error).endswith("images must be an object keyed by camera name")
    assert refusal({"images": [RED]}).field == "images"


def test_flat_image_keys_are_named_by_their_last_part():
    payload = {"observation.images.wrist": RED, "images.top": RED, "observation/left": RED}
    assert sorted(decode_payload(payload, "msgpack").images) == ["left", "top", "wrist"]


def test_slash_keys_are_images_only_when_they_hold_an_image():
    payload = {
        "observation/image": grey(2, 2),
        "observation/bytes": png_bytes(RED),
        "observation/state": [1.0, 2.0],
        "observation/flat": np.zeros(3),
        "observation/volume": np.zeros((1, 1, 1, 1)),
        "observation/gripper": 0.5,
    }
    decoded = decode_payload(payload, "msgpack")
    assert sorted(decoded.images) == ["bytes", "image"]
    np.testing.assert_array_equal(decoded.images["bytes"], RED)
    assert decoded.state.tolist() == [1.0, 2.0]
    assert sorted(decoded.extras) == ["observation/flat", "observation/gripper",
                                      "observation/volume"]  # fmt: skip


def test_a_slash_key_that_holds_no_image_does_not_stop_the_search():
    payload = {"observation/state": [1.0], "observation/gripper": 0.5, "observation/top": RED}
    decoded = decode_payload(payload, "msgpack")
    assert list(decoded.images) == ["top"] and decoded.state.tolist() == [1.0]


def test_a_slash_key_names_its_camera_by_all_that_follows_observation():
    decoded = decode_payload({"observation/wrist/left/raw": RED}, "msgpack")
    assert list(decoded.images) == ["wrist/left/raw"]


def test_keys_that_are_not_strings_are_not_flat_images():
    decoded = decode_payload({1: RED}, "msgpack")
    assert decoded.images == {} and list(decoded.extras) == [1]


def test_a_list_of_images_under_image_becomes_numbered_cameras():
    decoded = decode_payload({"image": [RED, {"b64_json": _b64(png_bytes(RED))}]}, "msgpack")
    assert list(decoded.images) == ["image_0", "image_1"]
    for frame in decoded.images.values():
        np.testing.assert_array_equal(frame, RED)


def test_a_pixel_list_under_image_is_one_image():
    decoded = decode_payload({"image": RED.tolist()}, "json")
    assert list(decoded.images) == ["image"]
    np.testing.assert_array_equal(decoded.images["image"], RED)


def test_an_empty_list_under_image_is_a_bad_image_not_a_crash():
    assert refusal({"image": []}).field == "image"


def test_state_and_noise_in_input_join_the_observation():
    payload = {"input": {"state": [1.0, 2.0], "noise": [0.5], "observation": {"state": [9.0]}}}
    decoded = decode_payload(payload, "json")
    assert decoded.state.tolist() == [1.0, 2.0] and decoded.extras == {"noise": [0.5]}


def test_images_in_input_replace_those_in_the_observation():
    payload = {"input": {"image": RED, "observation": {"image": grey(1, 1)}, "images": None}}
    np.testing.assert_array_equal(decode_payload(payload, "msgpack").images["image"], RED)


def test_sixteen_cameras_are_the_default_limit():
    cameras = {f"c{i}": RED for i in range(16)}
    assert len(decode_payload(nested({"images": cameras}), "msgpack").images) == 16
    error = refusal(nested({"images": {**cameras, "c16": RED}}))
    assert isinstance(error, PayloadTooLargeError) and error.field == "input.observation.images"
    assert str(error).endswith("17 cameras, over the limit of 16")


def test_the_camera_limit_counts_every_place_images_come_from():
    payload = {"images": {"a": RED}, "images.b": RED, "image": RED}
    assert len(decode_payload(payload, "msgpack", limits=DecodeLimits(max_cameras=3)).images) == 3
    error = refusal(payload, limits=DecodeLimits(max_cameras=2))
    assert str(error) == "images: 3 cameras, over the limit of 2"


def test_the_default_pixel_limit_applies_without_limits():
    error = refusal({"image": np.zeros((1, DEFAULT_MAX_PIXELS + 1), np.uint8)})
    assert isinstance(error, PayloadTooLargeError) and error.field == "image"


def test_decode_request_passes_its_limits_and_keep_jpeg_on():
    jpeg = jpeg_bytes()
    body = msgpack.packb({"images": {"a": jpeg, "b": png_bytes(RED)}})
    with pytest.raises(PayloadTooLargeError, match="2 cameras"):
        decode_request(body, "application/msgpack", limits=DecodeLimits(max_cameras=1))
    kept = decode_request(body, "application/msgpack", keep_jpeg=True).images
    assert kept["a"].shape == (len(jpeg),) and kept["a"].tobytes() == jpeg
    np.testing.assert_array_equal(kept["b"], RED)  # not a JPEG: decoded as usual
    decoded = decode_request(body, "application/msgpack").images
    assert decoded["a"].shape == (4, 8, 3)


def test_a_parsed_document_has_its_jpeg_decoded_unless_asked_to_keep_it():
    """Websocket messages arrive parsed, through `decode_payload`: its default decodes too."""
    image = decode_payload({"image": jpeg_bytes()}, "msgpack").images["image"]
    assert image.shape == (4, 8, 3) and np.abs(image.astype(int) - 128).max() <= 2


def test_encoded_images_and_arrays_together_all_decode():
    payload = {"images": {"png": {"b64_json": _b64(png_bytes(RED))}, "array": grey(1, 1, 255),
                          "bytes": png_bytes(RED), "list": RED.tolist()}}  # fmt: skip
    images = decode_payload(payload, "msgpack").images
    assert list(images) == ["png", "array", "bytes", "list"]
    np.testing.assert_array_equal(images["png"], RED)
    np.testing.assert_array_equal(images["array"], np.full((1, 1, 3), 255, np.uint8))


# JPEG kept as bytes for a policy that decodes it on its own device.


def test_a_kept_jpeg_is_its_bytes_read_only_from_every_form():
    jpeg = jpeg_bytes()
    for value in (jpeg, bytearray(jpeg), memoryview(jpeg), {"b64_json": _b64(jpeg)},
                  {"base64": _b64(jpeg)}):  # fmt: skip
        kept = kept_jpeg(value, "f", 10**6)
        assert kept is not None and kept.dtype == np.uint8 and kept.tobytes() == jpeg
        assert not kept.flags.writeable


@pytest.mark.parametrize(
    "value",
    [
        png_bytes(RED),
        {"b64_json": 3},
        {"values": [1]},
        b"\xff\xd8\xff" + b"\x00" * 40,  # a JPEG start, then nothing Pillow can read
        RED,
        "text",
    ],
)
def test_what_is_not_a_readable_jpeg_is_left_to_the_usual_decode(value):
    assert kept_jpeg(value, "f", 10**6) is None


def test_a_grey_jpeg_is_left_to_the_usual_decode_which_makes_it_rgb():
    assert kept_jpeg(jpeg_bytes(mode="L"), "f", 10**6) is None
    frame = decode_payload({"image": jpeg_bytes(mode="L")}, "msgpack", keep_jpeg=True).images
    assert frame["image"].shape == (4, 8, 3)


def test_a_kept_jpeg_is_refused_one_pixel_over_the_limit():
    jpeg = jpeg_bytes(width=8, height=4)
    assert kept_jpeg(jpeg, "f", 32) is not None
    with pytest.raises(PayloadTooLargeError) as caught:
        kept_jpeg(jpeg, "images.wrist", 31)
    assert str(caught.value) == "images.wrist: image has 32 pixels, over the limit of 31"


def test_a_kept_jpeg_with_a_limit_from_the_request_limits():
    payload = {"image": jpeg_bytes(width=8, height=4)}
    with pytest.raises(PayloadTooLargeError, match="over the limit of 31"):
        decode_payload(payload, "msgpack", limits=DecodeLimits(max_image_pixels=31), keep_jpeg=True)


@pytest.mark.parametrize(
    "value",
    [{"b64_json": "\xff\xd8!"}, jpeg_bytes()[:-200], {"base64": _b64(jpeg_bytes()[:-200])}],
)
def test_a_bad_kept_jpeg_names_its_field(value):
    error = refusal(nested({"images": {"wrist": value}}), keep_jpeg=True)
    assert error.field == "input.observation.images.wrist"


def test_the_jpeg_end_marker_must_be_in_the_last_64_bytes():
    jpeg = jpeg_bytes()
    assert jpeg.endswith(b"\xff\xd9")
    assert kept_jpeg(jpeg + b"\x00" * 62, "f", 10**6) is not None  # marker starts 64 from the end
    with pytest.raises(CodecError) as caught:
        kept_jpeg(jpeg + b"\x00" * 63, "images.wrist", 10**6)
    assert str(caught.value) == "images.wrist: truncated JPEG (no end-of-image marker)"


# State.


@pytest.mark.parametrize("key", ["state", "observation.state", "observation/state"])
def test_state_is_read_from_each_key_flattened_to_float32(key):
    decoded = decode_payload({key: [[1, 2], [3, 4]]}, "json")
    assert decoded.state.dtype == np.float32 and decoded.state.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert decoded.extras == {}


def test_the_first_state_key_wins_and_the_others_stay_extras():
    decoded = decode_payload({"observation.state": [2.0], "state": [1.0]}, "json")
    assert decoded.state.tolist() == [1.0] and decoded.extras == {"observation.state": [2.0]}
    decoded = decode_payload({"state": None, "observation/state": [3.0]}, "json")
    assert decoded.state.tolist() == [3.0]


def test_state_as_a_tensor_payload():
    state = {"values": [1, 2, 3, 4], "dtype": "int32", "shape": [2, 2]}
    decoded = decode_payload({"state": state}, "json")
    assert decoded.state.dtype == np.float32 and decoded.state.tolist() == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "uint8"])
def test_a_state_array_of_any_dtype_becomes_flat_float32(dtype):
    """msgpack brings the robot's own dtype; a float32 array is taken as it is."""
    state = np.array([[1, 2], [3, 4]], dtype)
    decoded = decode_payload({"state": state}, "msgpack")
    assert decoded.state.dtype == np.float32 and decoded.state.shape == (4,)
    assert decoded.state.tolist() == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_state_array_is_refused_in_every_dtype(dtype, bad):
    error = refusal(nested({"state": np.array([[1.0], [bad]], dtype)}))
    assert str(error) == "input.observation.state: state contains NaN or infinity"


@pytest.mark.parametrize(
    "state", [{"values": [1], "dtype": "complex64"}, {"values": [1, 2], "shape": [3]}]
)
def test_a_bad_tensor_state_names_its_field(state):
    assert refusal(nested({"state": state})).field == "input.observation.state"


@pytest.mark.parametrize(
    "state, message",
    [
        ([1, "a"], "state must be a list of numbers"),
        ([[1], [2, 3]], "state must be a list of numbers"),
        ([{}], "state must be a list of numbers"),
        ([2**1100], "state must be a list of numbers"),  # too large even for a float64
        ([1e39], "state contains NaN or infinity"),  # too large for a float32
        ([float("-inf")], "state contains NaN or infinity"),
    ],
)
def test_bad_state_is_refused_with_its_field_and_no_warning(state, message):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a server's log gets no numpy warning either
        error = refusal(nested({"state": state}))
    assert str(error) == f"input.observation.state: {message}"
    assert refusal({"observation/state": state}).field == "observation/state"


# Capture times.


def test_capture_times_become_float_seconds_by_camera_name():
    decoded = decode_payload(nested({"capture_times": {"a": 1, 2: 2.5}}), "msgpack")
    assert decoded.capture_times == {"a": 1.0, "2": 2.5}
    assert all(type(t) is float for t in decoded.capture_times.values())
    assert decoded.extras == {}


@pytest.mark.parametrize("times", [[1.0], {"a": True}, {"a": "1"}, {"a": None}, {"a": 1, "b": "x"}])
def test_bad_capture_times_are_refused_with_their_field(times):
    error = refusal(nested({"capture_times": times}))
    assert str(error) == (
        "input.observation.capture_times: capture_times must map camera names to seconds"
    )
    assert refusal({"capture_times": times}).field == "capture_times"


@pytest.mark.parametrize(
    "times", [{"a": float("nan")}, {"a": 1.0, "b": float("inf")}, {"a": -float("inf")}]
)
def test_non_finite_capture_times_are_refused(times):
    """msgpack carries NaN and infinity (JSON has no such numbers); the server refused NaN
    times over JSON but took them over msgpack."""
    error = refusal(nested({"capture_times": times}))
    assert str(error) == (
        "input.observation.capture_times: capture_times must be finite seconds (no NaN or infinity)"
    )


def test_a_capture_time_too_large_for_a_float_is_refused_not_crashed_on():
    body = b'{"input": {"observation": {"capture_times": {"a": 1' + b"0" * 400 + b"}}}}"
    with pytest.raises(CodecError, match="capture_times must be finite seconds"):
        decode_payload(json.loads(body), "json")


# Request id.


@pytest.mark.parametrize(
    "payload, request_id",
    [
        ({"request_id": "a", "id": "b"}, "a"),
        ({"id": "b"}, "b"),
        ({"request_id": None, "id": 9}, "9"),
        ({"request_id": 0}, "0"),
        ({}, None),
    ],
)
def test_the_request_id_is_request_id_then_id(payload, request_id):
    assert decode_payload(payload, "json").request_id == request_id


@pytest.mark.parametrize("value", [True, 1.5, [1], {"a": 1}])
def test_a_request_id_that_is_not_a_string_or_integer_is_refused(value):
    error = refusal({"input": {}, "id": value})
    assert error.field == "request_id" and str(error) == "request_id: request_id must be a string"


# The wire.


def test_decode_request_reads_the_body_on_the_wire_its_content_type_names():
    document = {"input": {"task": "t", "observation": {"image": RED.tolist()}}, "id": "x"}
    from_json = decode_request(json.dumps(document).encode(), "application/json; charset=utf-8")
    from_msgpack = decode_request(msgpack.packb(document), "application/x-msgpack")
    assert (from_json.wire, from_msgpack.wire) == ("json", "msgpack")
    for decoded in (from_json, from_msgpack):
        assert decoded.task == "t" and decoded.request_id == "x"
        np.testing.assert_array_equal(decoded.images["image"], RED)


def test_a_long_base64_string_in_a_json_body_is_read_from_the_bodys_bytes():
    """decode_request cuts long base64 strings out of a JSON body as bytes, never building them
    as Python strings: non-ASCII text in one is then no base64 digit (in a parsed document,
    with the string built, it is refused as non-ASCII text)."""
    document = {"images": {"wrist": {"b64_json": "é" * 40_000}}}
    body = json.dumps(document, ensure_ascii=False).encode()
    with pytest.raises(CodecError) as caught:
        decode_request(body, "application/json")
    assert str(caught.value).startswith("images.wrist: invalid base64: ")
    assert str(refusal(document)) == "images.wrist: base64 text has non-ASCII characters"

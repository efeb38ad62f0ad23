import json
import subprocess
import sys

import msgpack
import numpy as np
import pytest

from vla_client import Observation, encode_request
from vla_client.codecs import b64encode_text, encode_jpeg, encode_png
from vla_client.codecs.png_write import png_writer
from vla_client.errors import CodecError, PayloadTooLargeError, UnsupportedContentTypeError
from vla_client.protocol import ENCODINGS, WIRES, DecodeLimits
from vla_client.protocol.image_forms import encodes_in_parallel
from vla_client.server.wire.decode import decode_request


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("wire", WIRES)
def test_encode_then_decode_gives_back_the_arrays(observation, encoding, wire):
    body, content_type = encode_request(observation, encoding=encoding, wire=wire, request_id="r1")
    decoded = decode_request(body, content_type)
    assert decoded.request_id == "r1" and decoded.task == observation.task and decoded.wire == wire
    np.testing.assert_array_equal(decoded.state, observation.state.astype(np.float32))  # the API's
    assert set(decoded.images) == set(observation.images)
    for name, frame in observation.images.items():
        got = decoded.images[name]
        assert got.dtype == np.uint8 and got.flags.c_contiguous and got.shape == frame.shape
        if encoding == "jpeg":
            assert np.abs(got.astype(int) - frame).mean() < 4
        else:
            np.testing.assert_array_equal(got, frame)


def test_capture_times_travel_in_the_observation(frames):
    obs = Observation(frames, capture_times={"wrist": 12.5})
    body, content_type = encode_request(obs)
    assert json.loads(body)["input"]["observation"]["capture_times"] == {"wrist": 12.5}
    assert decode_request(body, content_type).capture_times == {"wrist": 12.5}


def test_sglang_request_shape(observation):
    body, _ = encode_request(
        observation, encoding="png", parameters={"seed": 3}, runtime={"response_format": "raw"}
    )
    document = json.loads(body)
    assert set(document) >= {"input", "parameters", "runtime"}
    assert document["input"]["task"] == "stack the blocks"
    assert set(document["input"]["observation"]["images"]["wrist"]) == {"b64_json"}
    assert document["parameters"] == {"seed": 3}
    assert document["runtime"] == {"response_format": "raw"}


def _png(frame):
    return b64encode_text(encode_png(frame))


def test_flat_openpi_observation_over_msgpack(frames):
    payload = {
        "observation.images.wrist": frames["wrist"],
        "observation/left": frames["left"],
        "images.right": frames["right"],
        "observation.state": np.ones(8, np.float32),
        "prompt": "fold the towel",
        "num_inference_steps": 4,
    }
    decoded = decode_request(
        msgpack.packb(payload, default=_default, use_bin_type=True), "application/msgpack"
    )
    assert decoded.flat and decoded.task == "fold the towel"
    assert set(decoded.images) == {"wrist", "left", "right"}
    assert decoded.parameters.num_inference_steps == 4
    np.testing.assert_array_equal(decoded.images["left"], frames["left"])
    assert decoded.output_format == "numpy"


def _default(obj):
    from vla_client.codecs.msgpack_numpy import _pack_default

    return _pack_default(obj)


def test_flat_keys_prompt_and_tensor_state_inside_input(frames):
    document = {
        "id": 17,
        "input": {
            "prompt": "use the prompt",
            "observation": {
                "observation.images.wrist": {
                    "base64": "data:image/jpeg;base64,"
                    + b64encode_text(encode_jpeg(frames["wrist"]))
                },
                "state": {"values": [1, 2, 3], "dtype": "float32"},
                "noise": [0.0],
            },
        },
        "parameters": {"action_horizon": "8"},
        "return_timing": False,
    }
    decoded = decode_request(json.dumps(document).encode(), "text/plain")
    assert decoded.request_id == "17" and decoded.task == "use the prompt"
    assert decoded.parameters.action_horizon == 8 and not decoded.runtime.return_timing
    assert decoded.state.tolist() == [1, 2, 3] and decoded.extras == {"noise": [0.0]}


def test_input_images_override_observation_images(frames):
    document = {
        "input": {
            "images": {"a": {"b64_json": _png(frames["left"])}},
            "observation": {"images": {"b": {"b64_json": _png(frames["right"])}}},
        }
    }
    decoded = decode_request(json.dumps(document).encode(), None)
    assert set(decoded.images) == {"a"}


def test_output_format_lookup_order(observation):
    body, ct = encode_request(
        observation, runtime={"output_format": "NUMPY", "response_format": "Raw"}
    )
    decoded = decode_request(body, ct)
    assert decoded.output_format == "numpy" and decoded.runtime.response_format == "raw"
    body, ct = encode_request(observation, parameters={"output_format": "numpy"})
    assert decode_request(body, ct).output_format == "numpy"
    body, ct = encode_request(observation, wire="msgpack", runtime={"output_format": "list"})
    assert decode_request(body, ct).output_format == "list"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([1, 2], "object"),
        ({"input": "x"}, "input must be an object"),
        ({"input": {"observation": []}}, "observation must be an object"),
        ({"input": {"task": 3, "observation": {}}}, "task must be a string"),
        ({"input": {"observation": {"images": [1]}}}, "images must be an object"),
        (
            {"input": {"observation": {"images": {}}}, "runtime": {"response_format": "xml"}},
            "runtime.response_format",
        ),
        (
            {"input": {"observation": {"images": {}}}, "runtime": {"output_format": "text"}},
            "output_format",
        ),
        ({"input": {"observation": {"images": {}}}, "parameters": {"seed": -1}}, "parameters.seed"),
        ({"input": {"observation": {"images": {}}}, "parameters": {"seed": True}}, "bool"),
        (
            {
                "input": {"observation": {"images": {}}},
                "parameters": {"num_inference_steps": "abc"},
            },
            "num_inference_steps",
        ),
        (
            {"input": {"observation": {"images": {}}}, "parameters": []},
            "parameters must be an object",
        ),
        ({"input": {"observation": {"images": {}, "state": [1, None]}}}, "state"),
        ({"input": {"observation": {"images": {}, "capture_times": {"a": "x"}}}}, "capture_times"),
        ({"request_id": {"a": 1}, "input": {}}, "request_id"),
    ],
)
def test_malformed_documents_name_the_field(document, message):
    with pytest.raises(CodecError, match=message):
        decode_request(json.dumps(document).encode(), "application/json")


def test_non_finite_state_is_refused():
    body = msgpack.packb({"input": {"observation": {"images": {}, "state": [1.0, float("nan")]}}})
    with pytest.raises(CodecError, match="NaN"):
        decode_request(body, "application/msgpack")


def test_malformed_bodies():
    with pytest.raises(CodecError, match="malformed JSON"):
        decode_request(b'{"input": ', "application/json")
    with pytest.raises(CodecError, match="malformed msgpack"):
        decode_request(b"\x81\xa1", "application/msgpack")
    with pytest.raises(UnsupportedContentTypeError):
        decode_request(b"\x89PNG", "image/png")


def test_limits(observation):
    body, ct = encode_request(observation, encoding="raw", wire="msgpack")
    with pytest.raises(PayloadTooLargeError, match="cameras"):
        decode_request(body, ct, limits=DecodeLimits(max_cameras=2))
    with pytest.raises(PayloadTooLargeError, match="pixels"):
        decode_request(body, ct, limits=DecodeLimits(max_image_pixels=100))


_THREADS_AFTER_ENCODING = """
import json, threading, numpy as np
from vla_client import Observation, encode_request
frames = {{name: np.full((48, 64, 3), i, np.uint8) for i, name in enumerate("abc")}}
encode_request(Observation(frames), encoding={encoding!r}, wire={wire!r})
print(json.dumps([t.name for t in threading.enumerate() if t.name.startswith("codec")]))
"""


@pytest.mark.parametrize(("encoding", "wire", "pooled"), [
    ("raw", "msgpack", False), ("jpeg", "msgpack", True), ("raw", "json", True),
    ("png", "json", png_writer() == "opencv"),
])  # fmt: skip
def test_only_encoders_that_release_the_gil_use_the_codec_threads(encoding, wire, pooled):
    """Raw frames on msgpack are their own wire value, and fpng's binding holds the GIL while
    it writes: handing three frames to the codec pool's threads and back would cost a thread
    wake-up each and save nothing. The encoders that release the GIL (OpenCV's, the numpy that
    writes value lists) still run in parallel."""
    assert encodes_in_parallel(encoding, wire) is pooled
    script = _THREADS_AFTER_ENCODING.format(encoding=encoding, wire=wire)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    threads = json.loads(done.stdout)
    assert bool(threads) is pooled, threads


def test_png_frames_use_the_codec_threads_when_opencv_writes_them(monkeypatch):
    monkeypatch.setattr("vla_client.protocol.image_forms.png_writer_holds_gil", lambda: False)
    assert encodes_in_parallel("png", "json") and encodes_in_parallel("png", "msgpack")
    monkeypatch.setattr("vla_client.protocol.image_forms.png_writer_holds_gil", lambda: True)
    assert not encodes_in_parallel("png", "json")


@pytest.mark.parametrize(("encoding", "wire", "pooled"), [
    ("png", "json", True), ("jpeg", "json", True), ("png", "msgpack", True),
    ("raw", "msgpack", False), ("raw", "json", False),
])  # fmt: skip
def test_encoded_images_decode_in_the_codec_threads(monkeypatch, encoding, wire, pooled):
    """Base64 images in JSON (``{"b64_json": ...}``) decode in parallel as bytes in msgpack
    do: inflating and libjpeg release the GIL. Arrays and value lists stay on the calling
    thread, where the hop to a thread would cost more than it saves."""
    import threading

    import vla_client.server.wire.decode as decode_module

    threads = []
    decode_value = decode_module.decode_image_value

    def recording(value, **options):
        threads.append(threading.current_thread().name)
        return decode_value(value, **options)

    monkeypatch.setattr(decode_module, "decode_image_value", recording)
    frames = {name: np.full((48, 64, 3), i * 40, np.uint8) for i, name in enumerate("abc")}
    body, content_type = encode_request(Observation(frames), encoding=encoding, wire=wire)
    decoded = decode_request(body, content_type)
    assert len(threads) == 3
    assert {name.startswith("codec") for name in threads} == {pooled}, threads
    if encoding != "jpeg":
        for name, frame in frames.items():
            np.testing.assert_array_equal(decoded.images[name], frame)

"""Property tests: every valid frame and observation survives every lossless wire form exactly."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image

from oracles import frame_digest_of
from vla_client.cameras.scene import synthetic_frames
from vla_client.codecs import (
    b64decode_text,
    b64encode_text,
    decode_image_bytes,
    encode_png,
    frame_digest,
    packb,
    unpackb,
)
from vla_client.codecs.png_write import PNG_PARAMS, encode_with_opencv
from vla_client.observation import Observation
from vla_client.protocol import dumps, encode_image_value, encode_request, loads
from vla_client.server.wire.decode import decode_image_value, decode_request

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

frames = hnp.arrays(
    np.uint8,
    st.tuples(st.integers(1, 24), st.integers(1, 24), st.just(3)),
    elements=st.integers(0, 255),
)
camera_names = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12
)
LOSSLESS = [
    ("png", "json"), ("png", "msgpack"), ("raw", "json"),
    ("raw", "msgpack"), ("pixels", "json"), ("pixels", "msgpack"),
]  # fmt: skip


@pytest.mark.parametrize(("encoding", "wire"), LOSSLESS)
@SETTINGS
@given(frame=frames)
def test_lossless_image_value_round_trips_exactly(
    encoding: str, wire: str, frame: np.ndarray
) -> None:
    value = loads(dumps(encode_image_value(frame, encoding, wire), wire), wire)  # type: ignore[arg-type]
    decoded = decode_image_value(value)
    assert decoded.dtype == np.uint8 and decoded.flags.c_contiguous
    np.testing.assert_array_equal(decoded, frame)
    assert frame_digest(decoded) == frame_digest_of(frame)


@SETTINGS
@given(frame=frames, layout=st.sampled_from(["c", "fortran", "flipped", "strided"]))
def test_the_digest_is_sha256_of_the_c_order_pixels_whatever_the_layout(
    frame: np.ndarray, layout: str
) -> None:
    """Against hashlib on ``tobytes()`` of the original: the whole frame, row by row."""
    expected = frame_digest_of(frame)
    if layout == "fortran":
        frame = np.asfortranarray(frame)
    elif layout == "flipped":  # a negative-stride view of a flipped copy, flipped back
        frame = np.ascontiguousarray(frame[::-1])[::-1]
    elif layout == "strided":  # every other column of a frame twice as wide
        wide = np.repeat(frame, 2, axis=1)
        frame = wide[:, ::2]
    assert frame_digest(frame) == expected


@pytest.mark.parametrize("wire", ["json", "msgpack"])
@SETTINGS
@given(frame=frames)
def test_jpeg_keeps_shape(wire: str, frame: np.ndarray) -> None:
    value = loads(dumps(encode_image_value(frame, "jpeg", wire), wire), wire)  # type: ignore[arg-type]
    assert decode_image_value(value).shape == frame.shape


numeric_dtypes = st.one_of(
    hnp.boolean_dtypes(),
    hnp.integer_dtypes(endianness="="),
    hnp.unsigned_integer_dtypes(endianness="="),
    hnp.floating_dtypes(endianness="=", sizes=(16, 32, 64)),
)


@SETTINGS
@given(array=hnp.arrays(numeric_dtypes, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0)))
def test_msgpack_arrays_round_trip_exactly(array: np.ndarray) -> None:
    back = unpackb(packb({"a": array, "nested": [array]}))
    for got in (back["a"], back["nested"][0]):
        assert got.dtype == array.dtype and got.shape == array.shape
        np.testing.assert_array_equal(got, array)


@SETTINGS
@given(data=st.binary(max_size=512), prefix=st.booleans())
def test_base64_round_trips(data: bytes, prefix: bool) -> None:
    text = b64encode_text(data)
    if not data:
        return
    assert b64decode_text(f"data:image/png;base64,{text}" if prefix else text) == data


observations = st.builds(
    Observation,
    images=st.dictionaries(camera_names, frames, min_size=1, max_size=3),
    state=st.one_of(
        st.none(),
        st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=14),
    ),
    task=st.text(max_size=40),
)


@pytest.mark.parametrize(("encoding", "wire"), LOSSLESS)
@SETTINGS
@given(observation=observations, request_id=st.text(min_size=1, max_size=20))
def test_every_valid_observation_round_trips(
    encoding: str, wire: str, observation: Observation, request_id: str
) -> None:
    body, content_type = encode_request(
        observation,
        encoding=encoding,
        wire=wire,
        request_id=request_id,  # type: ignore[arg-type]
    )
    decoded = decode_request(body, content_type)
    assert decoded.request_id == request_id
    assert decoded.task == observation.task
    assert decoded.images.keys() == observation.images.keys()
    for name, frame in observation.images.items():
        np.testing.assert_array_equal(decoded.images[name], frame)
    if observation.state is None:
        assert decoded.state is None
    else:
        np.testing.assert_array_equal(decoded.state, observation.state.astype(np.float32))


def _by_opencv(data: bytes) -> np.ndarray:
    return cv2.cvtColor(
        cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB
    )


def _by_pillow(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


def _scene(height: int, width: int, seed: int) -> np.ndarray:
    (frame,) = synthetic_frames(1, height, width, seed=seed).values()
    return frame


PNG_WRITERS = {
    "default": encode_png,
    "opencv": lambda frame: encode_with_opencv(".png", frame, PNG_PARAMS),
}
camera_like = st.builds(_scene, st.integers(16, 90), st.integers(16, 131), st.integers(0, 2**16))
odd_frames = hnp.arrays(
    np.uint8,
    st.tuples(st.integers(1, 40), st.sampled_from([1, 2, 3, 5, 7, 9, 31, 33, 127]), st.just(3)),
    elements=st.integers(0, 255),
)


@pytest.mark.parametrize("writer", PNG_WRITERS.values(), ids=PNG_WRITERS.keys())
@SETTINGS
@given(frame=camera_like | odd_frames)
def test_every_png_writer_is_read_exactly_by_every_decoder(writer, frame: np.ndarray) -> None:
    data = writer(frame)
    for decode in (_by_opencv, _by_pillow, decode_image_bytes):
        np.testing.assert_array_equal(decode(data), frame)


@pytest.mark.parametrize("writer", PNG_WRITERS.values(), ids=PNG_WRITERS.keys())
def test_a_12_megapixel_frame_is_written_and_read_exactly(writer) -> None:
    frame = np.random.default_rng(9).integers(0, 256, (3000, 4000, 3), dtype=np.uint8)
    frame[:1500] //= 16  # half noise, half smoother, so both coding paths are exercised
    data = writer(frame)
    for decode in (_by_opencv, _by_pillow, decode_image_bytes):
        np.testing.assert_array_equal(decode(data), frame)


# Big enough that every fast path is taken (JSON bodies over 64 KiB, msgpack lists over 16 KiB).
large_observations = st.builds(
    lambda frames, task: Observation({f"c{i}": f for i, f in enumerate(frames)}, task=task),
    st.lists(
        st.builds(
            lambda height, width, seed: next(
                iter(synthetic_frames(1, height, width, seed=seed).values())
            ),
            st.integers(60, 120),
            st.integers(61, 161),
            st.integers(0, 2**16),
        ),
        min_size=1,
        max_size=3,
    ),
    st.text(max_size=20),
)


@pytest.mark.parametrize(("encoding", "wire"), LOSSLESS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(observation=large_observations)
def test_large_frames_reach_the_server_decoder_exactly(
    encoding: str, wire: str, observation: Observation
) -> None:
    body, content_type = encode_request(observation, encoding=encoding, wire=wire)  # type: ignore[arg-type]
    decoded = decode_request(body, content_type)
    for name, frame in observation.images.items():
        np.testing.assert_array_equal(decoded.images[name], frame)


@pytest.mark.parametrize(("encoding", "wire"), [pair for pair in LOSSLESS if pair[1] == "msgpack"])
@pytest.mark.parametrize("camera", ["__ndarray__", "__npgeneric__"])
def test_a_camera_named_like_a_msgpack_marker_round_trips(
    encoding: str, wire: str, camera: str
) -> None:
    """Drawn once by the property test above (exploring): a camera named ``__ndarray__``, its
    pixels a list, was read back as a broken array."""
    frame = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    body, content_type = encode_request(
        Observation({camera: frame}),
        encoding=encoding,
        wire=wire,  # type: ignore[arg-type]
    )
    decoded = decode_request(body, content_type)
    assert list(decoded.images) == [camera]
    np.testing.assert_array_equal(decoded.images[camera], frame)

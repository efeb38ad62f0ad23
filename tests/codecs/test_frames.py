"""`as_rgb_frame`: every accepted layout to HxWx3 uint8 C order, every other one refused."""

from __future__ import annotations

import numpy as np
import pytest

from vla_client.codecs import as_rgb_frame
from vla_client.errors import CodecError

RGB = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)


def check(frame: np.ndarray, expected: np.ndarray) -> None:
    assert frame.dtype == np.uint8 and frame.flags.c_contiguous
    assert frame.shape == expected.shape
    np.testing.assert_array_equal(frame, expected)


def test_rgb_uint8_comes_back_as_it_is() -> None:
    check(as_rgb_frame(RGB), RGB)
    assert as_rgb_frame(RGB) is RGB or np.shares_memory(as_rgb_frame(RGB), RGB)


def test_a_non_contiguous_frame_is_made_c_contiguous() -> None:
    wide = np.repeat(RGB, 2, axis=1)[:, ::2]
    assert not wide.flags.c_contiguous
    check(as_rgb_frame(wide), RGB)
    check(as_rgb_frame(np.asfortranarray(RGB)), RGB)


def test_grey_and_single_channel_frames_are_repeated() -> None:
    grey = RGB[:, :, 0]
    expected = np.stack([grey, grey, grey], axis=2)
    check(as_rgb_frame(grey), expected)
    check(as_rgb_frame(grey[:, :, None]), expected)


def test_alpha_is_dropped() -> None:
    rgba = np.concatenate([RGB, np.full((4, 5, 1), 7, np.uint8)], axis=2)
    check(as_rgb_frame(rgba), RGB)


@pytest.mark.parametrize("dtype", [np.int16, np.int64, np.uint16])
def test_integers_in_range_are_converted(dtype: type) -> None:
    check(as_rgb_frame(RGB.astype(dtype)), RGB)
    extremes = np.array([[[0, 255, 128]]], dtype=dtype)
    check(as_rgb_frame(extremes), np.array([[[0, 255, 128]]], np.uint8))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_floats_in_0_1_are_scaled_and_rounded(dtype: type) -> None:
    floats = np.array([[[0.0, 1.0, 0.5], [0.2, 0.998, 0.002]]], dtype=dtype)
    # The nearest level to x * 255, x as stored: 0.998 is 0.998046875 in float16, and
    # 254.502 rounds to 255; in float32 and float64 it is 0.998000..., and 254.49 rounds to 254.
    level = 255 if dtype is np.float16 else 254
    expected = np.array([[[0, 255, 128], [51, level, 1]]], np.uint8)  # 127.5 rounds to even
    check(as_rgb_frame(floats), expected)


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.array([[[-1, 0, 0]]]), "integer pixel values must be in 0..255, got -1..0"),
        (np.array([[[0, 256, 0]]]), "integer pixel values must be in 0..255, got 0..256"),
        (
            np.array([[[0.0, 1.5, 0.0]]]),
            "float images must be in [0, 1] (send uint8 for 0..255 data)",
        ),
        (
            np.array([[[-0.5, 0.5, 0.0]]]),
            "float images must be in [0, 1] (send uint8 for 0..255 data)",
        ),
        (np.array([[[np.nan, 0, 0]]]), "float image contains NaN or infinity"),
        (np.array([[[np.inf, 0, 0]]]), "float image contains NaN or infinity"),
        (np.zeros((2, 2, 3), bool), "unsupported image dtype bool"),
        (np.zeros((2, 2, 3), np.complex64), "unsupported image dtype complex64"),
        (np.zeros((2, 2, 2), np.uint8), "image must have 1, 3 or 4 channels, got 2"),
        (np.zeros((2, 2, 5), np.uint8), "image must have 1, 3 or 4 channels, got 5"),
        (np.zeros((2, 2, 3, 1), np.uint8), "image must be HxWxC, got shape (2, 2, 3, 1)"),
        (np.zeros(12, np.uint8), "image must be HxWxC, got shape (12,)"),
        (np.zeros((0, 4, 3), np.uint8), "image has a zero-size dimension: (0, 4, 3)"),
        (np.zeros((4, 0, 3), np.uint8), "image has a zero-size dimension: (4, 0, 3)"),
        (
            np.zeros((3, 6, 8), np.uint8),
            "image shape (3, 6, 8) looks like CHW; transpose it to HxWxC "
            "(np.transpose(image, (1, 2, 0)))",
        ),
        (np.zeros((1, 5, 6), np.uint8), "image shape (1, 5, 6) looks like CHW; transpose it"),
        (np.zeros((4, 5, 7), np.uint8), "image shape (4, 5, 7) looks like CHW; transpose it"),
    ],
)
def test_other_layouts_are_refused_with_what_to_change(array: np.ndarray, message: str) -> None:
    with pytest.raises(CodecError) as caught:
        as_rgb_frame(array, field="images.cam")
    assert caught.value.field == "images.cam"
    assert str(caught.value).startswith(f"images.cam: {message}")


@pytest.mark.parametrize("shape", [(3, 4, 8), (4, 6, 8), (3, 5, 2), (5, 5, 5)])
def test_only_small_leading_dims_with_a_wide_second_look_like_chw(shape: tuple[int, ...]) -> None:
    """CHW is guessed only for 1, 3 or 4 leading rows and a width over 4; else the channels
    message stands."""
    with pytest.raises(CodecError) as caught:
        as_rgb_frame(np.zeros(shape, np.uint8))
    looks_chw = shape[0] in (1, 3, 4) and shape[1] > 4 and shape[2] not in (1, 3, 4)
    assert ("looks like CHW" in str(caught.value)) is looks_chw


def test_a_non_array_is_refused() -> None:
    with pytest.raises(CodecError, match=r"^images\.cam: image must be an array, got list$"):
        as_rgb_frame([[[0, 0, 0]]], field="images.cam")  # type: ignore[arg-type]


def test_empty_arrays_of_other_dtypes_are_refused_by_their_shape() -> None:
    for dtype in (np.int64, np.float32):
        with pytest.raises(CodecError, match="zero-size"):
            as_rgb_frame(np.zeros((0, 3, 3), dtype))


@pytest.mark.parametrize(
    "shape",
    [(0, 252950, 2133515, 2136335), (0, 2**30, 2**30), (2**30, 2**30, 0)],
    ids=["4-d", "no rows", "no channels"],
)
def test_an_empty_array_whose_dimensions_overflow_once_converted_is_refused(
    shape: tuple[int, ...],
) -> None:
    """An empty float16 array may announce dimensions numpy cannot convert to float64 (the
    byte count overflows): a forged msgpack array did that and raised numpy's ValueError, a
    500 at the server. The shape is refused first."""
    with pytest.raises(CodecError, match="image"):
        as_rgb_frame(np.empty(shape, np.float16), field="images.cam")

"""Frame preprocessing: openpi-equal resize_with_pad, centre crop, mapping to server metadata."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from PIL import Image

from vla_client.cameras.preprocess import (
    FramePreprocessor,
    center_crop_resize,
    parse_image_size,
    resize_with_pad,
)
from vla_client.cameras.scene import SyntheticScene
from vla_client.errors import ContractError, InvalidObservationError, ProtocolError
from vla_client.observation import Observation


def openpi_resize_with_pad(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """openpi's `image_tools.resize_with_pad` for one image, as its semantics are documented:
    PIL bilinear resize by the larger of the two scale ratios (sizes truncated with int()), pasted
    at the truncated centre offsets of an all-zero canvas; no work when the size already matches."""
    pil = Image.fromarray(image)
    cur_width, cur_height = pil.size
    if (cur_width, cur_height) == (width, height):
        return image
    ratio = max(cur_width / width, cur_height / height)
    resized_height, resized_width = int(cur_height / ratio), int(cur_width / ratio)
    resized = pil.resize((resized_width, resized_height), resample=Image.Resampling.BILINEAR)
    canvas = Image.new(resized.mode, (width, height), 0)
    canvas.paste(resized, (int((width - resized_width) / 2), int((height - resized_height) / 2)))
    return np.asarray(canvas)


def scene(height: int, width: int, seed: int = 0) -> np.ndarray:
    return SyntheticScene(max(16, height), max(16, width), seed=seed).render(1)[:height, :width]


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ((360, 640), (224, 224)),
        ((37, 53), (224, 224)),
        ((481, 641), (223, 97)),
        ((480, 640), (225, 301)),
        ((7, 3), (15, 31)),
        ((640, 360), (224, 224)),
        ((101, 99), (99, 101)),
    ],
)
def test_resize_with_pad_equals_openpi_on_odd_sizes(
    source: tuple[int, int], target: tuple[int, int]
) -> None:
    image = scene(*source)
    result = resize_with_pad(image, *target)
    assert result.shape == (*target, 3) and result.dtype == np.uint8
    np.testing.assert_array_equal(result, openpi_resize_with_pad(image, *target))


SIDE = st.integers(1, 90)


@settings(max_examples=60, deadline=None)
@given(SIDE, SIDE, SIDE, SIDE, st.integers(0, 9))
def test_resize_with_pad_equals_openpi_on_any_size(
    height: int, width: int, target_height: int, target_width: int, seed: int
) -> None:
    ratio = max(width / target_width, height / target_height)
    assume(int(height / ratio) > 0 and int(width / ratio) > 0)  # openpi fails on a 0-pixel side
    image = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    expected = openpi_resize_with_pad(image, target_height, target_width)
    np.testing.assert_array_equal(resize_with_pad(image, target_height, target_width), expected)


def test_resize_with_pad_keeps_aspect_and_centres_on_black() -> None:
    image = np.full((360, 640, 3), 200, dtype=np.uint8)
    result = resize_with_pad(image, 224, 224)
    rows = np.flatnonzero(result.any(axis=(1, 2)))
    assert result.any(axis=(0, 2)).all()  # full width used
    content_height = rows[-1] - rows[0] + 1
    assert abs(content_height - 224 * 360 / 640) <= 1  # never stretched
    assert abs(rows[0] - (224 - content_height - rows[0])) <= 1  # centred
    same = scene(224, 224)
    assert resize_with_pad(same, 224, 224) is same
    sliver = resize_with_pad(np.full((1, 90, 3), 9, dtype=np.uint8), 10, 3)
    assert sliver.shape == (10, 3, 3) and sliver.any()  # a 1-pixel line where openpi would fail


def test_center_crop_resize_keeps_the_centre() -> None:
    image = np.zeros((100, 300, 3), dtype=np.uint8)
    image[:, :100] = (255, 0, 0)
    image[:, 100:200] = (0, 255, 0)
    image[:, 200:] = (0, 0, 255)
    result = center_crop_resize(image, 50, 50)
    assert result.shape == (50, 50, 3)
    assert (result == (0, 255, 0)).all()
    tall = center_crop_resize(np.ascontiguousarray(image.transpose(1, 0, 2)), 30, 90)
    assert tall.shape == (30, 90, 3) and (tall == (0, 255, 0)).all()
    assert center_crop_resize(image, 100, 300) is image


@pytest.mark.parametrize(
    ("value", "size"),
    [
        (None, None),
        (224, (224, 224)),
        ([224, 320], (224, 320)),
        ((240, 320, 3), (240, 320)),
        ([3, 240, 320], (240, 320)),
        ({"height": 96, "width": 128}, (96, 128)),
    ],
)
def test_parse_image_size(value: object, size: tuple[int, int] | None) -> None:
    assert parse_image_size(value) == size


@pytest.mark.parametrize("value", ["224", [224], [0, 224], [224.0, 224], {"h": 1}, [True, 2]])
def test_malformed_image_size_is_a_protocol_error(value: object) -> None:
    with pytest.raises(ProtocolError, match="image_size"):
        parse_image_size(value)


def observation() -> Observation:
    images = {"wrist": scene(48, 64), "left": scene(48, 64, seed=1)}
    return Observation(images, [0.1], "pick", {"wrist": 1.0, "left": 2.0})


def test_without_metadata_nothing_changes() -> None:
    original = observation()
    result = FramePreprocessor.from_metadata({})(original)
    assert result.task == "pick" and result.capture_times == original.capture_times
    for name, image in original.images.items():
        np.testing.assert_array_equal(result.images[name], image)


def test_metadata_renames_and_resizes() -> None:
    metadata = {"input": {"image_keys": ["base_0_rgb", "wrist"], "image_size": [32, 40]}}
    result = FramePreprocessor.from_metadata(metadata, {"left": "base_0_rgb"})(observation())
    assert set(result.images) == {"base_0_rgb", "wrist"}
    assert result.capture_times == {"base_0_rgb": 2.0, "wrist": 1.0}
    np.testing.assert_array_equal(result.images["wrist"], resize_with_pad(scene(48, 64), 32, 40))
    np.testing.assert_array_equal(result.state, np.float32([0.1]))


def test_crop_fit_and_camera_aliases() -> None:
    metadata = {
        "input": {
            "image_keys": ["wrist", "left"],
            "camera_aliases": {"wrist_image_left": "wrist"},
            "image_size": 24,
        }
    }
    images = {"wrist_image_left": scene(48, 64), "left": scene(48, 64)}
    result = FramePreprocessor.from_metadata(metadata, fit="crop")(Observation(images))
    assert set(result.images) == {"wrist", "left"}
    np.testing.assert_array_equal(result.images["left"], center_crop_resize(scene(48, 64), 24, 24))


def test_cameras_the_server_does_not_know_are_refused() -> None:
    metadata = {"input": {"image_keys": ["base_0_rgb", "left_wrist_0_rgb"]}}
    with pytest.raises(InvalidObservationError, match=r"'wrist' matches none.*camera_map="):
        FramePreprocessor.from_metadata(metadata)(observation())
    with pytest.raises(ValueError, match="sends both 'wrist' and 'left' to 'base_0_rgb'"):
        FramePreprocessor.from_metadata(metadata, {"wrist": "base_0_rgb", "left": "base_0_rgb"})
    clash = FramePreprocessor.from_metadata(metadata, {"left": "base_0_rgb"})
    with pytest.raises(ContractError, match="'base_0_rgb' and 'left' on 'base_0_rgb'"):
        clash(Observation({"base_0_rgb": scene(48, 64), "left": scene(48, 64)}))
    with pytest.raises(ValueError, match="fit"):
        FramePreprocessor(fit="stretch")  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="'input'"):
        FramePreprocessor.from_metadata({"input": [1]})

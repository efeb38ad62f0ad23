"""Frame preprocessing: openpi-equal resize_with_pad, centre crop, mapping to server metadata."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from PIL import Image

from vla_client.cameras.preprocess import center_crop_resize, resize_with_pad
from vla_client.cameras.scene import SyntheticScene
from vla_client.client.fit import FramePreprocessor, parse_image_size
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


def test_an_observation_that_already_fits_is_passed_on_as_it_is() -> None:
    """Nothing to rename or resize: the checked observation itself goes on (not a copy checked
    again, frame by frame, on every control tick); a rename or a resize makes a new one."""
    original = observation()
    metadata = {"input": {"image_keys": ["wrist", "left"], "image_size": [48, 64],
                          "image_size_required": True, "state_dim": 1}}  # fmt: skip
    assert FramePreprocessor.from_metadata(metadata, fit="none")(original) is original
    assert FramePreprocessor.from_metadata({})(original) is original
    renamed = FramePreprocessor(camera_map={"left": "base"})(original)
    assert renamed is not original and set(renamed.images) == {"wrist", "base"}
    assert renamed.capture_times == {"wrist": 1.0, "base": 2.0}
    assert renamed.images["base"] is original.images["left"]
    resized = FramePreprocessor(size=(32, 40))(original)
    assert resized is not original and resized.images["wrist"].shape == (32, 40, 3)


def test_metadata_renames_and_resizes() -> None:
    metadata = {"input": {"image_keys": ["base_0_rgb", "wrist"], "image_size": [32, 40]}}
    result = FramePreprocessor.from_metadata(metadata, {"left": "base_0_rgb"})(observation())
    assert set(result.images) == {"base_0_rgb", "wrist"}
    assert result.capture_times == {"base_0_rgb": 2.0, "wrist": 1.0}
    np.testing.assert_array_equal(result.images["wrist"], resize_with_pad(scene(48, 64), 32, 40))
    np.testing.assert_array_equal(result.state, np.float64([0.1]))


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


def columns(height: int, width: int) -> np.ndarray:
    """A frame whose every column has its own grey level (10, 20, 30, ...)."""
    levels = (np.arange(width, dtype=np.uint8) + 1) * 10
    return np.ascontiguousarray(np.broadcast_to(levels[None, :, None], (height, width, 3)))


def pil_bilinear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    pil = Image.fromarray(np.ascontiguousarray(image))
    return np.asarray(pil.resize((width, height), resample=Image.Resampling.BILINEAR))


def test_center_crop_resize_cuts_the_middle_to_the_target_aspect() -> None:
    wide = columns(10, 30)  # a square from it is its middle 10 columns
    np.testing.assert_array_equal(
        center_crop_resize(wide, 5, 5), pil_bilinear(wide[:, 10:20], 5, 5)
    )
    tall = np.ascontiguousarray(wide.transpose(1, 0, 2))  # 30x10, each row its own level
    np.testing.assert_array_equal(center_crop_resize(tall, 5, 5), pil_bilinear(tall[10:20], 5, 5))
    # The same aspect at another size is no crop at all, only the scale.
    same_aspect = columns(20, 40)
    np.testing.assert_array_equal(
        center_crop_resize(same_aspect, 10, 20), pil_bilinear(same_aspect, 10, 20)
    )


def test_center_crop_resize_of_a_sliver_keeps_its_one_middle_pixel() -> None:
    line = columns(1, 5)  # levels 10..50; a 10x3 target's aspect is a 1x0.3 crop: one pixel
    assert (center_crop_resize(line, 10, 3) == 30).all()
    column = np.ascontiguousarray(line.transpose(1, 0, 2))
    assert (center_crop_resize(column, 3, 10) == 30).all()


def test_size_under_eight_pixels_a_side_is_refused() -> None:
    assert FramePreprocessor(size=(8, 8)).size == (8, 8)
    for size in [(7, 64), (64, 7)]:
        with pytest.raises(ValueError, match=re.escape(f"image size {size} is under 8 pixels")):
            FramePreprocessor(size=size)
    with pytest.raises(ValueError, match="fit must be one of 'pad', 'crop', 'none'; got 'x'"):
        FramePreprocessor(fit="x")  # type: ignore[arg-type]


def every_option() -> FramePreprocessor:
    """A preprocessor with every option set, as the metadata in the tests below announces."""
    return FramePreprocessor(
        size=(32, 48),
        fit="crop",
        camera_map={"x": "b"},
        server_keys=("a", "b"),
        aliases={"c": "a"},
        size_required=True,
        state_dim=7,
        depth_cameras={"d": "uint16"},
    )


def test_metadata_fields_are_read() -> None:
    spec = {
        "image_keys": ["a", "b"],
        "camera_aliases": {"c": "a"},
        "image_size": [32, 48],
        "image_size_required": True,
        "state_dim": 7,
        "depth_cameras": {"d": "uint16"},
    }
    pre = FramePreprocessor.from_metadata({"input": spec}, {"x": "b"}, fit="crop")
    assert pre == every_option()
    assert FramePreprocessor.from_metadata({"input": {"state_dim": 0}}).state_dim == 0
    assert FramePreprocessor.from_metadata({"input": {}}).depth_cameras == {}  # takes none
    assert FramePreprocessor().depth_cameras is None  # no metadata: not known, not checked
    for flag in [False, "true", 1, None]:
        spec = {"image_size": 16, "image_size_required": flag}
        assert FramePreprocessor.from_metadata({"input": spec}).size_required is False


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ([1], "metadata 'input' must be an object, got list"),
        ({"image_keys": "ab"}, "metadata input.image_keys must be a list of names, got 'ab'"),
        (
            {"image_keys": ["a", 2]},
            r"metadata input.image_keys must be a list of names, got \['a', 2\]",
        ),
        (
            {"camera_aliases": ["a"]},
            r"metadata input.camera_aliases must be an object, got \['a'\]",
        ),
        (
            {"camera_aliases": {"cam0": 1}},
            r"metadata input.camera_aliases must map names to names, got \{'cam0': 1\}",
        ),
        # the counts read as the bounds of issue 22 read them, with their messages
        ({"state_dim": -1}, r"metadata input.state_dim is -1, outside 0..65536"),
        ({"state_dim": True}, "metadata input.state_dim must be a whole number, got True"),
        ({"state_dim": "8"}, "metadata input.state_dim must be a whole number, got '8'"),
        ({"state_dim": 8.0}, r"metadata input.state_dim must be a whole number, got 8\.0"),
    ],
)
def test_malformed_metadata_says_which_field(spec: object, message: str) -> None:
    with pytest.raises(ProtocolError, match=f"^{message}$"):
        FramePreprocessor.from_metadata({"input": spec})


def test_an_announced_image_size_under_eight_pixels_is_a_contract_error() -> None:
    assert FramePreprocessor.from_metadata({"input": {"image_size": [8, 9]}}).size == (8, 9)
    with pytest.raises(ContractError) as caught:
        FramePreprocessor.from_metadata({"input": {"image_size": [7, 64]}})
    error = caught.value
    assert (error.field, error.expected, error.given) == (
        "input.image_size",
        ">= 8 pixels a side",
        (7, 64),
    )
    assert str(error) == (
        "input.image_size: the server expects >= 8 pixels a side, the observation has (7, 64)"
    )


def test_an_unknown_camera_error_names_the_keys_and_a_mapping() -> None:
    pre = FramePreprocessor(server_keys=("front", "side"))
    with pytest.raises(ContractError) as caught:
        pre.server_name("top")
    error = caught.value
    assert (error.field, error.expected, error.given) == (
        "input.image_keys",
        ["front", "side"],
        "camera 'top'",
    )
    assert str(error) == (
        "input.image_keys: the server expects ['front', 'side'], the observation has camera "
        "'top'; 'top' matches none of them; map it to one, for example camera_map={'top': 'front'}"
    )
    assert error.fix is not None and error.fix.values == ({"top": "front"},)


def test_two_cameras_on_one_key_and_a_key_left_empty_are_contract_errors() -> None:
    pre = FramePreprocessor(server_keys=("front", "side"), aliases={"cam0": "front"})
    with pytest.raises(ContractError) as caught:
        pre.check_names(["front", "cam0"])
    error = caught.value
    assert (error.field, error.expected, error.given) == (
        "input.image_keys",
        "one camera per key",
        "'front' and 'cam0' on 'front'",
    )
    with pytest.raises(ContractError) as caught:
        pre.check_names(["cam0"])
    error = caught.value
    assert (error.field, error.expected, error.given) == (
        "input.image_keys",
        ["front", "side"],
        ["front"],
    )
    assert str(error).endswith("the observation has ['front']; missing ['side']")
    assert pre.check_names(["side", "cam0"]) == {"side": "side", "cam0": "front"}


def test_a_required_size_refuses_other_frames_when_not_resizing() -> None:
    strict = FramePreprocessor(size=(48, 64), fit="none", size_required=True)
    frame = scene(48, 64)
    np.testing.assert_array_equal(strict(Observation({"cam": frame})).images["cam"], frame)
    with pytest.raises(ContractError) as caught:
        strict(Observation({"cam": scene(40, 64)}))
    error = caught.value
    assert (error.field, error.expected, error.given) == (
        "input.image_size",
        [48, 64],
        "'cam' at [40, 64]",
    )
    assert str(error).endswith(
        "; resize frames (resize='pad' or resize='crop') or send them at that size"
    )
    assert error.fix is not None and (error.fix.option, error.fix.values) == (
        "resize",
        ("pad", "crop"),
    )
    # the fix is data, so a caller other than Python code can name the option its own way
    assert error.describe(lambda option, value: f"<{option} {value}>").endswith(
        "; resize frames (<resize pad> or <resize crop>) or send them at that size"
    )
    # Announced but not required, or required with no size known: frames pass as they are.
    for loose in [
        FramePreprocessor(size=(48, 64), fit="none"),
        FramePreprocessor(size_required=True),
    ]:
        np.testing.assert_array_equal(
            loose(Observation({"cam": scene(40, 64)})).images["cam"], scene(40, 64)
        )


def test_a_state_of_another_length_or_none_is_refused() -> None:
    pre = FramePreprocessor(state_dim=3)
    images = {"cam": scene(16, 16)}
    np.testing.assert_array_equal(pre(Observation(images, [1, 2, 3])).state, np.float32([1, 2, 3]))
    for state, has in [([1, 2], 2), (None, "none")]:
        with pytest.raises(ContractError) as caught:
            pre(Observation(images, state))
        error = caught.value
        assert (error.field, error.expected, error.given) == ("input.state_dim", "3 values", has)
        assert str(error) == (
            f"input.state_dim: the server expects 3 values, the observation has {has}"
        )
    assert FramePreprocessor()(Observation(images)).state is None  # no state_dim, no check


@pytest.mark.parametrize(
    "camera_map", [[("a", "b")], {"": "b"}, {"a": ""}, {1: "b"}, {"a": 2}, {"a": None}]
)
def test_a_camera_map_must_map_names_to_names(camera_map: object) -> None:
    with pytest.raises(ValueError, match=r"^camera_map must map camera names to camera names, got"):
        FramePreprocessor(camera_map=camera_map)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ([240, 320, 1], (240, 320)),
        ([240, 320, 4], (240, 320)),
        ([1, 224], (1, 224)),
        ([4, 5, 6], (5, 6)),
    ],
)
def test_parse_image_size_channels_last_first_and_tiny(
    value: object, size: tuple[int, int]
) -> None:
    assert parse_image_size(value) == size


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (64, "size must be (height, width) or None; got 64"),
        ((64,), "size must be (height, width) or None; got (64,)"),
        ((64, 64, 3), "size must be (height, width) or None; got (64, 64, 3)"),
        ((64.0, 64), "size height must be an integer > 0; got 64.0"),
        ((64, 0), "size width must be an integer > 0; got 0"),
    ],
)
def test_a_size_that_is_not_two_whole_sides_is_refused(size: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        FramePreprocessor(size=size)  # type: ignore[arg-type]


def test_describe_lists_what_is_checked_and_changed() -> None:
    pre = every_option()
    assert pre.describe() == {
        "cameras": ["a", "b"],
        "camera_aliases": {"c": "a"},
        "camera_map": {"x": "b"},
        "state_dim": 7,
        "image_size": [32, 48],
        "image_size_required": True,
        "resize": "crop",
        "depth_cameras": {"d": "uint16"},
    }
    assert FramePreprocessor(fit="crop").describe() == {
        "cameras": "any",
        "camera_aliases": {},
        "camera_map": {},
        "state_dim": None,
        "image_size": None,
        "image_size_required": False,
        "resize": "none",
    }


def test_the_mapping_proposed_for_an_unknown_camera_is_onto_a_key_no_other_camera_fills() -> None:
    """Cameras wrist and left against a server taking wrist and front: left goes to front, not
    to wrist, which the robot's own wrist camera fills (issue 34.3)."""
    pre = FramePreprocessor(server_keys=("wrist", "front"))
    with pytest.raises(ContractError) as caught:
        pre.check_names(["wrist", "left"])
    assert caught.value.fix is not None and caught.value.fix.values == ({"left": "front"},)
    assert caught.value.given == "camera 'left'"
    # several unknown cameras: one proposal maps them all, in order, onto the free keys
    pre = FramePreprocessor(server_keys=("a", "b", "c"), aliases={"top": "b"})
    with pytest.raises(ContractError) as caught:
        pre.check_names(["x", "top", "y"])
    assert caught.value.fix is not None and caught.value.fix.values == ({"x": "a", "y": "c"},)
    # an alias or a map onto a key counts as taken
    pre = FramePreprocessor(server_keys=("a", "b"), camera_map={"cam": "a"})
    with pytest.raises(ContractError) as caught:
        pre.check_names(["cam", "z"])
    assert caught.value.fix is not None and caught.value.fix.values == ({"z": "b"},)
    assert pre.check_names(["cam", "b"]) == {"cam": "a", "b": "b"}


def test_with_every_key_filled_an_extra_camera_is_told_to_go() -> None:
    pre = FramePreprocessor(server_keys=("wrist", "front"))
    with pytest.raises(ContractError) as caught:
        pre.check_names(["wrist", "front", "left"])
    error = caught.value
    assert error.fix is None
    assert str(error) == (
        "input.image_keys: the server expects ['wrist', 'front'], the observation has camera "
        "'left'; 'left' matches none of them and the other cameras fill them all: send 2 camera(s)"
    )


def test_a_camera_map_onto_no_server_camera_names_the_servers_cameras() -> None:
    pre = FramePreprocessor(server_keys=("wrist", "front"), camera_map={"front": "nosuch"})
    with pytest.raises(ContractError) as caught:
        pre.check_names(["wrist", "front"])
    error = caught.value
    assert error.given == "camera 'front' mapped to 'nosuch'"
    assert str(error).endswith(
        "'nosuch' is not a server camera; map it to one, for example camera_map={'front': 'front'}"
    )
    one = FramePreprocessor(server_keys=("wrist",), camera_map={"front": "nosuch"})
    with pytest.raises(ContractError, match="'nosuch' is not a server camera and the other "):
        one.check_names(["wrist", "front"])
    # a map onto an alias is a map onto its camera
    aliased = FramePreprocessor(server_keys=("wrist",), aliases={"hand": "wrist"},
                                camera_map={"cam": "hand"})  # fmt: skip
    assert aliased.server_name("cam") == "wrist"
    # with no server keys known, any name passes, mapped or not
    assert FramePreprocessor(camera_map={"a": "b"}).server_name("a") == "b"


def test_depth_is_resized_by_nearest_neighbour_never_blended():
    """Every pixel of a resized depth frame is one of the camera's own values (or the padding's
    0): a blend of a near edge and a far wall is a distance nothing was at."""
    depth = np.repeat(np.array([[500, 9000]], np.uint16), 6, axis=0).repeat(4, axis=1)  # 6x8
    observation = Observation({}, depth={"d": depth})
    for fit in ("pad", "crop"):
        fitted = FramePreprocessor(size=(12, 12), fit=fit, depth_cameras={"d": "uint16"})(
            observation
        )
        frame = fitted.depth["d"]
        assert frame.shape == (12, 12) and frame.dtype == np.uint16
        assert set(np.unique(frame)) <= {0, 500, 9000}
    metres = np.linspace(0.5, 3.0, 256, dtype=np.float32).reshape(16, 16)
    halved = FramePreprocessor(size=(8, 8), fit="pad")(Observation({}, depth={"m": metres}))
    np.testing.assert_array_equal(halved.depth["m"], metres[1::2, 1::2])  # the centres' pixels


def test_depth_is_checked_against_the_announced_depth_cameras():
    millimetres = np.zeros((8, 8), np.uint16)
    fit = FramePreprocessor(camera_map={"cam": "d"}, depth_cameras={"d": "uint16"})
    renamed = fit(Observation({}, depth={"cam": millimetres}, capture_times={"cam": 1.0}))
    assert list(renamed.depth) == ["d"] and renamed.capture_times == {"d": 1.0}
    cases = [
        ({"d": np.zeros((8, 8), np.float32)},
         "input.depth_cameras: the server expects {'d': 'uint16'}, the observation has depth of "
         "dtype {'d': 'float32'}; depth is never converted: send uint16 millimetres or float32 "
         "metres as asked"),
        ({"e": millimetres},
         "input.depth_cameras: the server expects {'d': 'uint16'}, the observation has depth "
         "['e']; unknown ['e'], missing ['d']"),
    ]  # fmt: skip
    for depth, message in cases:
        with pytest.raises(ContractError) as refused:
            FramePreprocessor(depth_cameras={"d": "uint16"})(
                Observation({"f": np.zeros((8, 8, 3), np.uint8)}, depth=depth)
            )
        assert str(refused.value) == message
    with pytest.raises(ContractError, match=r"has no depth; unknown \[\], missing \['d'\]$"):
        FramePreprocessor(depth_cameras={"d": "uint16"})(
            Observation({"f": np.zeros((8, 8, 3), np.uint8)})
        )
    required = FramePreprocessor(size=(8, 8), fit="none", size_required=True)
    with pytest.raises(ContractError, match=r"^input.image_size: .*'d' at \[4, 4\]"):
        required(Observation({}, depth={"d": np.zeros((4, 4), np.uint16)}))

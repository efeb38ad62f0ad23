"""openpi layouts: each builds the dict openpi's example clients send, and reads back to the flat
form; an observation that cannot fill a layout is refused naming what is missing."""

from __future__ import annotations

import numpy as np
import pytest

from vla_client.errors import CodecError, ContractError
from vla_client.observation import Observation
from vla_client.protocol import ALOHA, DROID, FLAT, LIBERO, build_openpi_request, openpi_layout

RNG = np.random.default_rng(4)


def frames(*names: str) -> dict[str, np.ndarray]:
    return {name: RNG.integers(0, 256, (12, 16, 3), dtype=np.uint8) for name in names}


def test_droid_matches_openpis_droid_example_keys() -> None:
    images = frames("exterior_image_1_left", "wrist_image_left")
    state = np.arange(8, dtype=np.float32)
    request = build_openpi_request(Observation(images, state, "pick"), DROID)
    assert set(request) == {
        "observation/exterior_image_1_left",
        "observation/wrist_image_left",
        "observation/joint_position",
        "observation/gripper_position",
        "prompt",
    }
    np.testing.assert_array_equal(
        request["observation/wrist_image_left"], images["wrist_image_left"]
    )
    np.testing.assert_array_equal(request["observation/joint_position"], state[:7])
    np.testing.assert_array_equal(request["observation/gripper_position"], state[7:])
    assert request["prompt"] == "pick"


def test_libero_matches_openpis_libero_example_keys() -> None:
    images = frames("image", "wrist_image")
    request = build_openpi_request(Observation(images, np.ones(8), "open"), LIBERO)
    assert set(request) == {
        "observation/image",
        "observation/wrist_image",
        "observation/state",
        "prompt",
    }
    assert request["observation/state"].shape == (8,)


def test_aloha_sends_channels_first_images_in_a_dict() -> None:
    images = frames("cam_high", "cam_low", "cam_left_wrist", "cam_right_wrist")
    request = build_openpi_request(Observation(images, np.zeros(14), "fold"), ALOHA)
    assert set(request) == {"images", "state", "prompt"}
    assert set(request["images"]) == set(images)
    chw = request["images"]["cam_high"]
    assert chw.shape == (3, 12, 16) and chw.flags.c_contiguous
    np.testing.assert_array_equal(np.transpose(chw, (1, 2, 0)), images["cam_high"])


@pytest.mark.parametrize("layout", [FLAT, DROID, LIBERO, ALOHA], ids=lambda layout: layout.name)
def test_every_layout_reads_back_to_the_flat_form(layout) -> None:
    names = layout.cameras or ("top", "side")
    images = frames(*names)
    state = np.linspace(0, 1, layout.state_dim or 5, dtype=np.float32)
    request = build_openpi_request(Observation(images, state, "t"), layout, request_id="r1")
    flat = layout.to_flat(request)
    for name, frame in images.items():
        np.testing.assert_array_equal(flat[f"observation.images.{name}"], frame)
    np.testing.assert_array_equal(flat["observation.state"], state)
    assert flat["prompt"] == "t" and flat["request_id"] == "r1"


def test_a_missing_camera_or_wrong_state_names_the_layout() -> None:
    with pytest.raises(ContractError) as caught:
        build_openpi_request(Observation(frames("wrist_image_left", "left"), np.zeros(8)), DROID)
    assert str(caught.value).endswith(
        "name the robot's cameras after the layout's, for example "
        "camera_map={'left': 'exterior_image_1_left'}"
    )
    with pytest.raises(ContractError, match=r"droid.*cameras.*after the layout's with camera_map$"):
        build_openpi_request(Observation(frames("wrist_image_left"), np.zeros(8)), DROID)
    droid_frames = frames("exterior_image_1_left", "wrist_image_left")
    with pytest.raises(ContractError, match=r"8 values.*joint_position \(7\).*has 7"):
        build_openpi_request(Observation(droid_frames, np.zeros(7)), DROID)
    with pytest.raises(ContractError, match="has None"):
        build_openpi_request(Observation(droid_frames), DROID)


def test_a_server_refuses_requests_that_do_not_fill_its_layout() -> None:
    with pytest.raises(CodecError, match="observation/wrist_image_left"):
        DROID.to_flat({"observation/exterior_image_1_left": np.zeros((4, 4, 3), np.uint8)})
    half_state = {
        "observation/exterior_image_1_left": 1,
        "observation/wrist_image_left": 2,
        "observation/joint_position": np.zeros(7),
    }
    with pytest.raises(CodecError, match="all of the state keys"):
        DROID.to_flat(half_state)
    channels_last = frames("cam_high", "cam_low", "cam_left_wrist", "cam_right_wrist")
    with pytest.raises(CodecError, match="channels first"):
        ALOHA.to_flat({"images": channels_last})


def test_a_layout_function_and_unknown_names() -> None:
    request = build_openpi_request(
        Observation(frames("a")), lambda obs: {"img": obs.images["a"]}, parameters={"seed": 3}
    )
    assert set(request) == {"img", "seed"}
    with pytest.raises(ValueError, match="'flat', 'droid', 'libero', 'aloha'"):
        openpi_layout("bridge")

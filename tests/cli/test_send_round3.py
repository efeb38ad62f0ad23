"""``vla-client send`` as a new user met it, round 3: ``--verify`` after the client resized,
camera-map hints that work, and what ``--cameras N``, two ``--image`` of one name, ``--state``
and a dying server do (issue 34 items 2, 3 and 9)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import cv2
import numpy as np
import pytest

from vla_client import ActionClient, ContractError, Observation, mismatched_cameras
from vla_client.server import LocalServer, ReferencePolicy, create_app


@pytest.fixture(scope="module")
def fixed_url() -> Iterator[str]:
    """``serve --cameras wrist,front --image-size 224x224 --require-image-size``."""
    policy = ReferencePolicy(
        camera_names=("wrist", "front"), image_size=(224, 224), image_size_required=True
    )
    with LocalServer(create_app(policy)) as server:
        yield server.url


@pytest.mark.parametrize(
    "transport", [(), ("--encoding", "raw", "--wire", "msgpack"), ("--encoding", "pixels")]
)
def test_verify_compares_the_server_with_the_frames_as_fitted(cli, fixed_url, transport):
    """The client pads 240x320 frames to the server's 224x224; the server's digests are of
    what it was sent, and those match."""
    run = cli("send", fixed_url, "--height", "240", "--width", "320", "--verify", *transport)
    assert run.code == 0, run.err + run.out
    assert "lossless: yes" in run.out


def test_verify_names_cameras_as_the_server_does_after_a_camera_map(cli, fixed_url):
    run = cli(
        "send", fixed_url, "--cameras", "2", "--camera-map", "wrist=front",
        "--camera-map", "front=wrist", "--height", "240", "--width", "320", "--verify", "--json",
    )  # fmt: skip
    assert run.code == 0, run.err
    assert json.loads(run.out)["lossless"] is True


def test_mismatched_cameras_in_python_after_a_resize(fixed_url):
    frames = {
        "wrist": np.full((240, 320, 3), 40, np.uint8),
        "front": np.full((100, 80, 3), 200, np.uint8),
    }
    with ActionClient(fixed_url, encoding="png") as client:
        result = client.infer(Observation(frames), return_digest=True)
    assert result.sent_digests is not None
    assert result.sent_digests["wrist"]["shape"] == [224, 224, 3]
    assert mismatched_cameras(Observation(frames), result) == []


def test_mismatched_cameras_still_sees_a_difference(fixed_url):
    frames = {name: np.full((224, 224, 3), 7, np.uint8) for name in ("wrist", "front")}
    with ActionClient(fixed_url, encoding="jpeg", jpeg_quality=30) as client:
        noisy = dict(
            frames, front=np.random.default_rng(0).integers(0, 255, (224, 224, 3), np.uint8)
        )
        result = client.infer(Observation(noisy), return_digest=True)
    assert mismatched_cameras(Observation(noisy), result) == ["front"]


def test_cameras_n_keeps_the_servers_names(cli, fixed_url):
    run = cli("send", fixed_url, "--cameras", "2", "--json")
    assert run.code == 0, run.err
    assert set(json.loads(run.out)["bytes_per_camera"]) == {"wrist", "front"}


def test_the_hint_maps_onto_a_server_camera_no_other_camera_takes(cli, error_line, fixed_url):
    """``--cameras 3`` gives wrist, front and a spare: the spare has nowhere to go. A camera
    map that sends wrist elsewhere proposes the one key left, and that proposal works."""
    run = cli("send", fixed_url, "--cameras", "3")
    line = error_line(run.err)
    assert "fill them all: send 2 camera(s)" in line, line
    frame = np.zeros((224, 224, 3), np.uint8)
    with ActionClient(fixed_url) as client, pytest.raises(ContractError) as caught:
        client.infer(Observation({"wrist": frame, "left": frame}))
    assert "camera_map={'left': 'front'}" in str(caught.value)
    with ActionClient(fixed_url, camera_map={"left": "front"}) as client:
        assert client.infer(Observation({"wrist": frame, "left": frame})).actions.size


def test_the_cli_hint_for_an_unknown_camera_is_a_map_that_works(
    cli, error_line, fixed_url, tmp_path
):
    paths = []
    for name in ("wrist", "left"):
        path = tmp_path / f"{name}.png"
        cv2.imwrite(str(path), np.zeros((224, 224, 3), np.uint8))
        paths += ["--image", f"{name}={path}"]
    line = error_line(cli("send", fixed_url, *paths).err)
    assert "--camera-map left=front" in line and "left=wrist" not in line, line
    assert cli("send", fixed_url, *paths, "--camera-map", "left=front").code == 0


def test_a_camera_map_onto_no_server_camera_says_so(cli, error_line, fixed_url):
    run = cli("send", fixed_url, "--cameras", "2", "--camera-map", "front=nosuch")
    assert run.code == 1
    line = error_line(run.err)
    assert (
        "camera 'front' mapped to 'nosuch'; 'nosuch' is not a server camera; map it to one, "
        "for example --camera-map front=front" in line
    ), line


def test_two_images_of_one_name_are_a_usage_error(cli, usage_error, tmp_path, server_url):
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    for path in (first, second):
        cv2.imwrite(str(path), np.zeros((16, 16, 3), np.uint8))
    line = usage_error(cli("send", server_url, "--image", f"x={first}", "--image", f"x={second}"))
    assert "--image names camera 'x' twice" in line


@pytest.mark.parametrize("state", ["1,2,x", "1,nan", "1,,2"])
def test_a_state_that_is_not_numbers_is_a_usage_error(cli, usage_error, server_url, state):
    line = usage_error(cli("send", server_url, "--state", state))
    assert f"argument --state: takes comma-separated finite numbers, got {state!r}" in line


def test_record_help_says_what_record_defaults_to(cli):
    run = cli("record", "--help")
    assert run.code == 0
    assert "announces" not in run.out and "the server's image size" not in run.out
    assert "e.g. 0,0.1,0.2 (default: none)" in " ".join(run.out.split())


def test_send_help_says_a_video_loops(cli):
    run = cli("send", "--help")
    assert "from its start again when it ends" in " ".join(run.out.split())


def test_a_camera_that_does_not_open_points_at_vla_client_cameras(cli, error_line, tmp_path):
    run = cli("record", str(tmp_path / "r.vlaobs"), "--camera", "wrist=/dev/video99")
    assert run.code == 1
    line = error_line(run.err)
    assert "/dev/video99" in line and "`vla-client cameras` lists the cameras" in line, line

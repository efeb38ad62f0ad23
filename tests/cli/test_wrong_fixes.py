"""Errors whose fix was wrong (issue 45 item 5), each as a user types the command: the fix
named now is one that works."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest

from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app

PI05_CAMERAS = ("base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb")


@pytest.fixture(scope="module")
def pi05_like_url() -> Iterator[str]:
    """A server with SGLang Pi0.5's three cameras."""
    policy = ReferencePolicy(camera_names=PI05_CAMERAS)
    with LocalServer(create_app(policy, ServerConfig(in_process=True))) as server:
        yield server.url


@pytest.fixture
def image(tmp_path: Path) -> str:
    path = tmp_path / "front.png"
    cv2.imwrite(str(path), np.zeros((32, 32, 3), np.uint8))
    return str(path)


@pytest.mark.parametrize(
    ("policy", "needs"),
    [("lerobot", "--policy-option path=DIR"), ("replay", "--replay-file")],
)
def test_serve_without_a_policys_file_names_the_option_of_that_policy(
    cli, policy: str, needs: str
) -> None:
    run = cli("serve", "--policy", policy)
    assert (run.code, run.err) == (2, f"vla-client: error: --policy {policy} needs {needs}\n")


def test_eval_against_the_reference_server_names_the_reach_policy(cli, usage_error) -> None:
    with LocalServer(create_app(ReferencePolicy(), ServerConfig(in_process=True))) as server:
        line = usage_error(cli("eval", server.url, "--episodes", "1"))
    assert "serve the reach task's policy, vla-client serve --policy reach" in line
    assert "--action-dim" not in line


def test_one_camera_against_pi05_names_every_missing_camera_at_once(
    cli, error_line, pi05_like_url, image
) -> None:
    line = error_line(cli("send", pi05_like_url, "--image", f"front={image}").err)
    assert "--camera-map front=base_0_rgb" in line
    assert (
        "the server needs 3 cameras and the observation has 1: add cameras for "
        "'left_wrist_0_rgb', 'right_wrist_0_rgb' too"
    ) in line


def test_a_camera_map_key_that_matches_no_camera_is_warned_of(cli, wrist_only_url) -> None:
    run = cli(
        "send", wrist_only_url, "--cameras", "1", "--height", "16", "--width", "16",
        "--camera-map", "wirst=wrist",
    )  # fmt: skip
    assert run.code == 0, run.err
    assert run.err == (
        "vla-client: warning: --camera-map wirst=wrist does nothing: no camera is named 'wirst' "
        "(the cameras: wrist)\n"
    )


def test_cameras_with_a_camera_that_does_not_open_gives_the_hint_send_gives(
    cli, error_line
) -> None:
    run = cli("cameras", "--camera", "wrist=99", "--timeout", "1")
    assert run.code == 1
    line = error_line(run.err)
    assert line.endswith(
        "; `vla-client cameras` without --camera lists the cameras this machine has"
    ), line

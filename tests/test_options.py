"""Every option of the public API is checked when given: a value that cannot work is refused.

Enum-like options name their valid choices; numbers name their range. The safety gate and the
watchdog have their own tests (tests/control); these cover retries, cameras, recordings and
the server's settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vla_client.cameras import (
    CameraRig,
    ImageFolderCamera,
    OpenCVCamera,
    SyntheticCamera,
    VideoFileCamera,
    open_camera,
)
from vla_client.client.fit import FramePreprocessor
from vla_client.errors import CameraError, CameraSettingError
from vla_client.protocol import DecodeLimits
from vla_client.recording import ObservationWriter
from vla_client.server.config import ServerConfig, WorkerSettings
from vla_client.server.edge.auth import APIKeyMiddleware, check_api_key
from vla_client.transports.retry import Backoff, RetryPolicy

NAN = float("nan")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"initial_s": -0.1}, "initial_s must be a number >= 0"),
        ({"initial_s": NAN}, "initial_s must be a number >= 0"),
        ({"max_s": -1}, "max_s must be a number >= 0"),
        ({"multiplier": 0.5}, "multiplier must be a number >= 1"),
        ({"multiplier": "2"}, "multiplier must be a number >= 1"),
    ],
)
def test_backoff_refuses(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Backoff(**options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_attempts": 0}, "max_attempts must be an integer >= 1"),
        ({"max_attempts": 2.5}, "max_attempts must be an integer >= 1"),
        ({"max_attempts": True}, "max_attempts must be an integer >= 1"),
        ({"max_total_s": -1.0}, "max_total_s must be a number >= 0"),
        ({"max_total_s": NAN}, "max_total_s must be a number >= 0"),
        ({"backoff": 0.1}, "backoff must be a Backoff"),
    ],
)
def test_retry_policy_refuses(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**options)


def test_good_retry_settings_pass() -> None:
    policy = RetryPolicy(max_attempts=1, max_total_s=0.0, backoff=Backoff(0.0, 0.0, 1.0))
    assert policy.backoff.delay(3) == 0.0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SyntheticCamera(fps=0), "fps must be a number > 0"),
        (lambda: SyntheticCamera(fps=NAN), "fps must be a number > 0"),
        (lambda: SyntheticCamera(width=0), "width must be an integer > 0"),
        (lambda: SyntheticCamera(height=-5), "height must be an integer > 0"),
        (lambda: SyntheticCamera(width=64.5), "width must be an integer > 0"),
        (lambda: SyntheticCamera(seed=-1), "seed must be an integer >= 0"),
        (lambda: ImageFolderCamera(".", fps=-1), "fps must be a number > 0"),
        (lambda: OpenCVCamera(0, width=0), "width must be an integer > 0"),
        (lambda: OpenCVCamera(0, fps=0), "fps must be a number > 0"),
        (lambda: OpenCVCamera(0, fourcc="MJPEG"), "FOURCC must be four characters"),
        (lambda: OpenCVCamera(0, warmup_frames=-1), "warmup_frames must be an integer >= 0"),
        (lambda: OpenCVCamera(0, timeout_s=0), "timeout_s must be a number > 0"),
        (lambda: OpenCVCamera(0, reconnect_delay_s=-1), "reconnect_delay_s must be a number > 0"),
        (lambda: CameraRig({}), "at least one camera"),
        (lambda: CameraRig({"a": SyntheticCamera()}, max_age_s=0), "max_age_s must be a number"),
        (lambda: CameraRig({"a": SyntheticCamera()}, timeout_s=-1), "timeout_s must be a number"),
        (lambda: CameraRig({"a": SyntheticCamera()}, preprocessor=3), "must be callable"),
    ],
)
def test_camera_options_are_refused_when_the_camera_is_made(make: Any, message: str) -> None:
    with pytest.raises(CameraSettingError, match=message) as caught:
        make()
    # Both a camera error and a ValueError: callers may catch either.
    assert isinstance(caught.value, CameraError) and isinstance(caught.value, ValueError)


def test_a_video_files_rate_of_zero_is_refused_as_given(tmp_path: Path) -> None:
    with pytest.raises(CameraSettingError, match="fps must be a number > 0"):
        VideoFileCamera(tmp_path / "missing.mp4", fps=0)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("synthetic?fps=0", "fps must be a number > 0"),
        ("synthetic?width=-3", "width must be an integer > 0"),
        ("0?fourcc=MJPEG", "FOURCC must be four characters"),
        ("0?timeout_s=nan", "timeout_s must be a number > 0"),
        ("synthetic?speed=2", "unknown setting 'speed'"),
    ],
)
def test_camera_specs_with_bad_settings_are_refused(spec: str, message: str) -> None:
    with pytest.raises(CameraError, match=message):
        open_camera(spec)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fit": "stretch"}, "fit must be one of 'pad', 'crop', 'none'; got 'stretch'"),
        ({"fit": None}, "fit must be one of 'pad', 'crop'"),
        ({"size": (224,)}, "size must be"),
        ({"size": (0, 224)}, "size height must be an integer > 0"),
        ({"size": (224, 22.5)}, "size width must be an integer > 0"),
    ],
)
def test_frame_preprocessor_refuses(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FramePreprocessor(**options)


@pytest.mark.parametrize("image_format", ["jpg", "webp", "PNG", "", None])
def test_a_recording_format_other_than_png_jpeg_or_raw_is_refused(
    tmp_path: Path, image_format: Any
) -> None:
    with pytest.raises(ValueError, match="image_format must be one of 'png', 'jpeg', 'raw'"):
        ObservationWriter(tmp_path / "run.vlaobs", image_format=image_format)
    assert not (tmp_path / "run.vlaobs").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"port": 65536}, r"port must be in 0\.\.65535"),
        ({"port": -1}, "port must be an integer >= 0"),
        ({"port": 80.5}, "port must be an integer >= 0"),
        ({"host": ""}, "host must be"),
        ({"model_name": ""}, "model_name must be"),
        ({"max_body_bytes": 0}, "max_body_bytes must be an integer > 0"),
        ({"max_ws_message_bytes": -1}, "max_ws_message_bytes must be an integer > 0"),
        ({"idle_timeout_s": 0}, "idle_timeout_s must be an integer > 0"),
        ({"max_connections": 0}, "max_connections must be an integer > 0"),
        ({"body_timeout_s": 0.0}, "body_timeout_s must be a number > 0"),
        ({"infer_timeout_s": NAN}, "infer_timeout_s must be a number > 0"),
        ({"limits": DecodeLimits(max_cameras=0)}, "limits.max_cameras must be an integer > 0"),
        ({"limits": DecodeLimits(max_image_pixels=-1)}, "limits.max_image_pixels must be"),
        ({"limits": {"max_cameras": 2}}, "limits must be a DecodeLimits"),
        ({"worker": {"max_batch": 2}}, "worker must be a WorkerSettings"),
        ({"in_process": "yes"}, "in_process must be True or False"),
        ({"api_key": ""}, "api_key must not be empty"),
        ({"api_key": " key"}, "api_key must be printable ASCII"),
        ({"api_key": "k\u00e9y"}, "api_key must be printable ASCII"),
        ({"api_key": "k\ney"}, "api_key must be printable ASCII"),
    ],
)
def test_server_config_refuses(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ServerConfig(**options)


def test_server_config_errors_never_show_the_key() -> None:
    with pytest.raises(ValueError) as caught:
        ServerConfig(api_key=" s3cret-key ")
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_batch": 0}, "max_batch must be an integer >= 1"),
        ({"max_batch": 257}, r"max_batch must be in 1\.\.256"),
        ({"max_batch": 2.5}, "max_batch must be an integer >= 1"),
        ({"queue_size": 0}, "queue_size must be an integer >= 1"),
        ({"queue_size": 5000}, r"queue_size must be in 1\.\.4096"),
        ({"batch_wait_ms": -1}, r"batch_wait_ms must be in 0\.\.1000"),
        ({"batch_wait_ms": NAN}, r"batch_wait_ms must be in 0\.\.1000"),
        ({"inference_timeout_s": 0}, "inference_timeout_s must be a number > 0"),
    ],
)
def test_worker_settings_refuse(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        WorkerSettings(**options)


def test_an_empty_key_never_matches() -> None:
    for headers in ({"authorization": "Bearer"}, {"authorization": "Bearer "}, {}):
        assert not check_api_key(headers, "")
        assert not check_api_key(headers, "k3y")
    assert not check_api_key({"authorization": "Api-Key  "}, "k3y")
    assert check_api_key({"authorization": "Bearer k3y"}, "k3y")
    with pytest.raises(ValueError, match="api_key must not be empty"):
        APIKeyMiddleware(lambda *_: None, api_key="")  # type: ignore[arg-type]


def test_good_settings_pass() -> None:
    config = ServerConfig(port=0, api_key="k3y", max_connections=None, limits=DecodeLimits(1, 1))
    assert config.port == 0 and config.worker == WorkerSettings()
    assert FramePreprocessor(size=(224, 224), fit="crop").size == (224, 224)
    assert SyntheticCamera(width=np.int64(32), height=16).width == 32  # numpy integers count

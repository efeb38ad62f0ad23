"""Cameras for the robot side: live devices, video files, image folders and synthetic scenes,
read together by a `CameraRig` into timestamped `Observation`s.

Importing this package opens no device and starts no thread; `open()` (or a ``with`` block) does.
"""

from vla_client.cameras.base import Camera, CameraBase, Frame
from vla_client.cameras.discovery import CameraDevice, Mode, list_devices
from vla_client.cameras.image_folder import ImageFolderCamera
from vla_client.cameras.opencv import OpenCVCamera
from vla_client.cameras.rig import CameraRig, RigCapture
from vla_client.cameras.spec import open_camera, open_cameras, parse_camera_args
from vla_client.cameras.synthetic import SyntheticCamera
from vla_client.cameras.video_file import VideoFileCamera
from vla_client.errors import CameraError, CameraTimeoutError, StaleFrameError

__all__ = [
    "Camera",
    "CameraBase",
    "CameraDevice",
    "CameraError",
    "CameraRig",
    "CameraTimeoutError",
    "Frame",
    "ImageFolderCamera",
    "Mode",
    "OpenCVCamera",
    "RigCapture",
    "StaleFrameError",
    "SyntheticCamera",
    "VideoFileCamera",
    "list_devices",
    "open_camera",
    "open_cameras",
    "parse_camera_args",
]

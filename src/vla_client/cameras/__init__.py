"""Cameras for the robot side: live devices, video files, image folders and synthetic scenes,
read together by a `CameraRig` into timestamped `Observation`s.

Importing this package opens no device and starts no thread; `open()` (or a ``with`` block) does.
"""

from typing import TYPE_CHECKING

from vla_client._lazy import lazy_face

if TYPE_CHECKING:
    from vla_client.cameras.base import Camera as Camera
    from vla_client.cameras.base import CameraBase as CameraBase
    from vla_client.cameras.base import Frame as Frame
    from vla_client.cameras.discovery import CameraDevice as CameraDevice
    from vla_client.cameras.discovery import Mode as Mode
    from vla_client.cameras.discovery import list_devices as list_devices
    from vla_client.cameras.image_folder import ImageFolderCamera as ImageFolderCamera
    from vla_client.cameras.opencv import OpenCVCamera as OpenCVCamera
    from vla_client.cameras.rig import CameraRig as CameraRig
    from vla_client.cameras.rig import RigCapture as RigCapture
    from vla_client.cameras.spec import open_camera as open_camera
    from vla_client.cameras.spec import open_cameras as open_cameras
    from vla_client.cameras.spec import parse_camera_args as parse_camera_args
    from vla_client.cameras.synthetic import SyntheticCamera as SyntheticCamera
    from vla_client.cameras.video_file import VideoFileCamera as VideoFileCamera
    from vla_client.errors import CameraError as CameraError
    from vla_client.errors import CameraTimeoutError as CameraTimeoutError
    from vla_client.errors import StaleFrameError as StaleFrameError

# What `lazy_face` hands out: each name of the block above, from the same module.
_FACE = {
    "Camera": "vla_client.cameras.base",
    "CameraBase": "vla_client.cameras.base",
    "Frame": "vla_client.cameras.base",
    "CameraDevice": "vla_client.cameras.discovery",
    "Mode": "vla_client.cameras.discovery",
    "list_devices": "vla_client.cameras.discovery",
    "ImageFolderCamera": "vla_client.cameras.image_folder",
    "OpenCVCamera": "vla_client.cameras.opencv",
    "CameraRig": "vla_client.cameras.rig",
    "RigCapture": "vla_client.cameras.rig",
    "open_camera": "vla_client.cameras.spec",
    "open_cameras": "vla_client.cameras.spec",
    "parse_camera_args": "vla_client.cameras.spec",
    "SyntheticCamera": "vla_client.cameras.synthetic",
    "VideoFileCamera": "vla_client.cameras.video_file",
    "CameraError": "vla_client.errors",
    "CameraTimeoutError": "vla_client.errors",
    "StaleFrameError": "vla_client.errors",
}
__getattr__, __dir__, __all__ = lazy_face(__name__, _FACE)

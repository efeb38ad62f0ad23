"""'vla-client cameras': list the cameras on this machine, or check the configured ones.

Without --camera it lists the capture devices with their modes, so a user can pick a --camera
spec and a FOURCC and size the device really offers. With --camera NAME=SPEC options it reads one
synchronised capture from them and reports each frame's size and age and the skew between them;
--grid out.png saves those frames as one labelled picture to check framing and colour. To see
the frames of a recording, use 'vla-client view FILE'.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from vla_client.cli.checks import check_output_file, file_type
from vla_client.cli.failures import failure_line
from vla_client.cli.output import fail
from vla_client.cli.parser import seconds
from vla_client.errors import CameraError

if TYPE_CHECKING:  # imported where used: the options are parsed without OpenCV
    from vla_client.cameras import CameraDevice

GRID_SUFFIXES = (".png", ".jpg", ".jpeg")


def register(parser: argparse.ArgumentParser) -> None:
    """The command's options, on its `parser`."""
    parser.add_argument(
        "--camera",
        action="append",
        default=[],
        metavar="NAME=SPEC",
        help="a camera to read: device index, /dev/videoN, video file, image folder, "
        "synthetic[:SEED]; settings after '?', e.g. 0?width=1280&height=720&fourcc=MJPG",
    )
    parser.add_argument(
        "--grid", metavar="FILE.png", type=file_type(*GRID_SUFFIXES),
        help="save one picture of all cameras (the ones found if none is given)",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", type=seconds, default=5.0, metavar="SECONDS",
        help="how long to wait for frames",
    )  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """List devices, or capture once from the configured cameras; 0 on success, 1 on failure
    (also when more than one OpenCV wheel is installed: which cv2 is loaded is then chance)."""
    from vla_client.cameras import list_devices, parse_camera_args
    from vla_client.cameras.opencv_install import opencv_clash

    clash = opencv_clash()
    if clash is not None:
        return fail(clash)
    try:
        specs = parse_camera_args(args.camera)
        if args.grid:
            check_output_file(args.grid, "--grid")
        if not specs:
            devices = list_devices()
            _print_devices(devices)
            if not args.grid:
                return 0
            specs = {f"cam{i}": device.spec for i, device in enumerate(devices)}
            if not specs:
                return fail("no cameras to put in a grid")
        return _check(specs, args.grid, args.timeout)
    except (CameraError, ValueError) as exc:
        return fail(failure_line(exc, args))


def _print_devices(devices: list[CameraDevice]) -> None:
    if not devices:
        print("no cameras found")
    for device in devices:
        print(f"{device.spec}: {device.current}")
        for mode in device.modes:
            print(f"    {mode}")


def _check(specs: Mapping[str, str], grid: str | None, timeout: float) -> int:
    import cv2

    from vla_client.cameras import CameraRig
    from vla_client.cli.sheet import frame_grid
    from vla_client.cli.sources import CAMERAS_HINT, camera_for

    cameras = {name: camera_for(spec) for name, spec in specs.items()}
    rig = CameraRig(cameras, timeout_s=timeout, max_age_s=max(timeout, 1.0))
    try:
        rig.open()
    except CameraError as exc:  # the hint `send` gives, said for here
        hint = f"{CAMERAS_HINT} without --camera lists the cameras this machine has"
        raise CameraError(f"{exc}; {hint}") from exc
    try:
        capture = rig.capture()
        now = time.monotonic()
    finally:
        rig.close()
    for name, frame in capture.frames.items():
        height, width = frame.image.shape[:2]
        age = f"{frame.age(now) * 1000:.0f} ms old"
        print(f"{name} ({specs[name]}): {width}x{height}, frame #{frame.sequence}, {age}")
    print(f"skew between cameras: {capture.skew_s * 1000:.1f} ms")
    if grid:
        images = {name: frame.image for name, frame in capture.frames.items()}
        if not cv2.imwrite(grid, cv2.cvtColor(frame_grid(images), cv2.COLOR_RGB2BGR)):
            return fail(f"cannot write {grid}")
        print(f"saved {grid}")
    return 0

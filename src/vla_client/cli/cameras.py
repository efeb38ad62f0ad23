"""'vla-client cameras': list the cameras on this machine, or check the configured ones.

Without --camera it lists the capture devices with their modes, so a user can pick a --camera
spec and a FOURCC and size the device really offers. With --camera NAME=SPEC options it reads one
synchronised capture from them and reports each frame's size and age and the skew between them;
--grid out.png saves those frames as one labelled picture to check framing and colour.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Mapping

import cv2
import numpy as np

from vla_client.cameras import (
    CameraDevice,
    CameraError,
    CameraRig,
    list_devices,
    open_camera,
    parse_camera_args,
)

GRID_TILE_HEIGHT = 360


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``cameras`` subcommand."""
    parser = subparsers.add_parser(
        "cameras",
        help="list cameras and their modes, or check configured ones",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--camera",
        action="append",
        default=[],
        metavar="NAME=SPEC",
        help="a camera to read: device index, /dev/videoN, video file, image folder, "
        "synthetic[:SEED]; settings after '?', e.g. 0?width=1280&height=720&fourcc=MJPG",
    )
    parser.add_argument(
        "--grid", metavar="PNG", help="save one PNG grid of all cameras (found ones if none given)"
    )
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for frames")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """List devices, or capture once from the configured cameras; 0 on success, 1 on failure."""
    try:
        specs = parse_camera_args(args.camera)
        if not specs:
            devices = list_devices()
            _print_devices(devices)
            if not args.grid:
                return 0
            specs = {f"cam{i}": device.spec for i, device in enumerate(devices)}
            if not specs:
                print("no cameras to put in a grid")
                return 1
        return _check(specs, args.grid, args.timeout)
    except CameraError as exc:
        print(f"error: {exc}")
        return 1


def _print_devices(devices: list[CameraDevice]) -> None:
    if not devices:
        print("no cameras found")
    for device in devices:
        print(f"{device.spec}: {device.current}")
        for mode in device.modes:
            print(f"    {mode}")


def _check(specs: Mapping[str, str], grid: str | None, timeout: float) -> int:
    cameras = {name: open_camera(spec) for name, spec in specs.items()}
    with CameraRig(cameras, timeout_s=timeout, max_age_s=max(timeout, 1.0)) as rig:
        capture = rig.capture()
        now = time.monotonic()
    for name, frame in capture.frames.items():
        height, width = frame.image.shape[:2]
        age = f"{frame.age(now) * 1000:.0f} ms old"
        print(f"{name} ({specs[name]}): {width}x{height}, frame #{frame.sequence}, {age}")
    print(f"skew between cameras: {capture.skew_s * 1000:.1f} ms")
    if grid:
        images = {name: frame.image for name, frame in capture.frames.items()}
        if not cv2.imwrite(grid, cv2.cvtColor(frame_grid(images), cv2.COLOR_RGB2BGR)):
            print(f"error: cannot write {grid}")
            return 1
        print(f"saved {grid}")
    return 0


def frame_grid(images: Mapping[str, np.ndarray], tile_height: int = GRID_TILE_HEIGHT) -> np.ndarray:
    """RGB frames scaled to one height, labelled with their names, in a near-square grid."""
    tiles = []
    for name, image in images.items():
        width = max(1, round(image.shape[1] * tile_height / image.shape[0]))
        tile = cv2.resize(image, (width, tile_height), interpolation=cv2.INTER_AREA)
        for colour, thickness in (((0, 0, 0), 4), ((255, 255, 255), 2)):  # outlined label
            cv2.putText(
                tile, name, (8, 28), cv2.FONT_HERSHEY_SIMPLEX, 0.9, colour, thickness, cv2.LINE_AA
            )
        tiles.append(tile)
    columns = math.ceil(math.sqrt(len(tiles)))
    rows = math.ceil(len(tiles) / columns)
    cell_width = max(tile.shape[1] for tile in tiles)
    canvas = np.zeros((rows * tile_height, columns * cell_width, 3), dtype=np.uint8)
    for index, tile in enumerate(tiles):
        top, left = (index // columns) * tile_height, (index % columns) * cell_width
        canvas[top : top + tile_height, left : left + tile.shape[1]] = tile
    return canvas

"""Does a `CameraRig` sustain 30 Hz of 3-camera observations on this machine?

Runs rigs of paced cameras (synthetic 360x640 scenes by default, optionally MJPG video files and
preprocessing to the server's size) for a few seconds each and prints, per rig: the achieved
observation rate against the target and their ratio, the capture cost per observation (CPU time,
the work the robot process pays; wall time includes waiting for frames), the skew between the
cameras of one observation, the age of its oldest frame, and the rate the CPU cost alone would
allow (1 / CPU time per observation). The tests assert no timing; this is where it is measured.

    PYTHONPATH=src python benchmarks/bench_cameras.py --seconds 5
    PYTHONPATH=src python benchmarks/bench_cameras.py --video --preprocess 224x224
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import cv2
import numpy as np

from vla_client.cameras import Camera, CameraRig, SyntheticCamera, VideoFileCamera
from vla_client.cameras.scene import SyntheticScene, camera_names
from vla_client.client.fit import FramePreprocessor


def measure(
    cameras: Mapping[str, Camera], seconds: float, preprocessor: FramePreprocessor | None
) -> dict[str, float]:
    """Capture for `seconds`; rate, per-capture wall and CPU cost, skew and oldest-frame age."""
    wall, cpu, skew, age = [], [], [], []
    with CameraRig(cameras, max_age_s=1.0, preprocessor=preprocessor) as rig:
        rig.capture()  # warm up caches and the first frames
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            t0, c0 = time.perf_counter(), time.process_time()
            capture = rig.capture()
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - t0)
            skew.append(capture.skew_s)
            age.append(time.monotonic() - min(capture.observation.capture_times.values()))
        elapsed = time.monotonic() - started

    def ms(values: list[float], q: float) -> float:
        return float(np.percentile(values, q) * 1e3)

    return {
        "rate": len(wall) / elapsed,
        "cpu_ms": sum(cpu) / len(cpu) * 1e3,
        "wall_p50": ms(wall, 50),
        "skew_p50": ms(skew, 50),
        "skew_p99": ms(skew, 99),
        "skew_max": max(skew) * 1e3,
        "age_p99": ms(age, 99),
    }


def synthetic_rig(count: int, height: int, width: int, fps: float) -> dict[str, Camera]:
    return {
        name: SyntheticCamera(seed=i, width=width, height=height, fps=fps)
        for i, name in enumerate(camera_names(count))
    }


def video_rig(folder: Path, count: int, height: int, width: int, fps: float) -> dict[str, Camera]:
    """MJPG .avi files of 60 synthetic frames each, played by `VideoFileCamera`s."""
    cameras: dict[str, Camera] = {}
    for i, name in enumerate(camera_names(count)):
        path = folder / f"{name}.avi"
        if not path.exists():
            scene = SyntheticScene(height, width, seed=i)
            fourcc = cv2.VideoWriter.fourcc(*"MJPG")
            writer = cv2.VideoWriter(str(path), fourcc, 30, (width, height))
            for t in range(60):
                writer.write(cv2.cvtColor(scene.render(t), cv2.COLOR_RGB2BGR))
            writer.release()
        cameras[name] = VideoFileCamera(path, fps=fps)
    return cameras


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fps", type=float, default=30.0, help="target observation rate, Hz")
    parser.add_argument("--seconds", type=float, default=5.0, help="per rig")
    parser.add_argument("--cameras", type=int, default=3)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--video", action="store_true", help="also rigs of MJPG video files")
    parser.add_argument("--preprocess", metavar="HxW", help="resize_with_pad to this size")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        run(args, stack)


def run(args: argparse.Namespace, stack: contextlib.ExitStack) -> None:
    """Build the rigs the options ask for, measure each and print the table."""

    preprocessor = None
    if args.preprocess:
        height, width = (int(side) for side in args.preprocess.lower().split("x"))
        preprocessor = FramePreprocessor(size=(height, width))
    shape = (args.cameras, args.height, args.width)
    rigs: list[tuple[str, Callable[[], dict[str, Camera]]]] = [
        ("synthetic", lambda: synthetic_rig(*shape, args.fps)),
    ]
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_cameras_")))
    if args.video:
        rigs.append(("video file (MJPG)", lambda: video_rig(folder, *shape, args.fps)))

    print(
        f"{args.cameras} cameras {args.height}x{args.width}, target {args.fps:g} Hz, "
        f"preprocess {args.preprocess or 'none'}; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, OpenCV {cv2.__version__}"
    )
    header = (
        f"{'rig':<20}{'Hz':>7}{'ratio':>7}{'cpu ms/obs':>12}{'cpu-bound Hz':>14}{'wall p50':>10}"
        f"{'skew p50':>10}{'skew p99':>10}{'skew max':>10}{'age p99':>9}"
    )
    print(header)
    print("-" * len(header))
    for label, make in rigs:
        result = measure(make(), args.seconds, preprocessor)
        print(
            f"{label:<20}{result['rate']:>7.1f}{result['rate'] / args.fps:>7.2f}"
            f"{result['cpu_ms']:>12.2f}{1e3 / max(result['cpu_ms'], 1e-3):>14.0f}"
            f"{result['wall_p50']:>10.2f}{result['skew_p50']:>10.2f}{result['skew_p99']:>10.2f}"
            f"{result['skew_max']:>10.2f}{result['age_p99']:>9.2f}"
        )
    print("times in ms; ratio = achieved / target rate; age = now minus oldest capture time")


if __name__ == "__main__":
    main()

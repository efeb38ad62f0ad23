"""``vla-client view``: see what the robot saw in a recording.

Writes a contact sheet, one PNG with a row per step and a column per camera, each frame labelled
with its step's sequence number (its position in the file, from 0) and its time since the first
step; long recordings show ``--frames`` steps spread evenly from the first to the last. With
``--video DIR`` it also writes one MP4 per camera (``DIR/NAME.mp4``, every step, at the
recording's median rate) with the same labels. With ``--rerun OUT.rrd`` it writes the
recording as a Rerun file instead (`vla_client.viz.recording_to_rerun`; ``rerun OUT.rrd`` opens
it). Reads recordings of 'vla-client record', of a server's 'serve --record' and of 'eval
--record'. The output paths are checked before the recording is read.
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from vla_client.cli.checks import (
    check_output_file,
    check_output_folder,
    file_type,
    require_module,
)
from vla_client.cli.output import fail
from vla_client.cli.parser import positive_int
from vla_client.errors import RecordingError

if TYPE_CHECKING:  # imported where used: the options are parsed without numpy or OpenCV
    import cv2
    import numpy as np

    from vla_client.recording import ObservationReader

SHEET_SUFFIXES = (".png", ".jpg", ".jpeg")
DEFAULT_FPS = 10.0


def register(parser: argparse.ArgumentParser) -> None:
    """The command's options, on its `parser`."""
    parser.add_argument("recording", metavar="FILE", help="a recording (.vlaobs)")
    parser.add_argument(
        "--out", type=file_type(*SHEET_SUFFIXES), metavar="SHEET.png",
        help="the contact sheet to write (default: FILE with .png for .vlaobs)",
    )  # fmt: skip
    parser.add_argument(
        "--video", metavar="DIR", help="also write one MP4 per camera into DIR (made if missing)"
    )
    parser.add_argument(
        "--frames", type=positive_int, default=12, metavar="N", help="steps on the sheet"
    )
    parser.add_argument(
        "--tile-height", type=positive_int, default=180, metavar="PX",
        help="height of each frame on the sheet",
    )  # fmt: skip
    parser.add_argument(
        "--rerun", type=file_type(".rrd"), metavar="OUT.rrd",
        help="write the recording as a Rerun file instead of a sheet "
        "(pip install 'vla-client[rerun]')",
    )  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import cv2

    from vla_client.recording import ObservationReader

    if args.rerun:
        return _to_rerun(args)
    out = args.out or str(Path(args.recording).with_suffix(".png"))
    check_output_file(out, "--out")
    if args.video:
        check_output_folder(args.video, "--video")
    with ObservationReader(args.recording) as reader:
        times = reader.wall_times()
        if not times:
            return fail(f"{args.recording!r} holds no observations")
        rows, videos = _read_steps(args, reader, times)
    picture = contact_sheet(args.recording, rows, times)
    if not cv2.imwrite(out, cv2.cvtColor(picture, cv2.COLOR_RGB2BGR)):
        return fail(f"cannot write {out}")
    height, width = picture.shape[:2]
    print(f"wrote {out}: {len(rows)} of {len(times)} step(s), {width}x{height}")
    if videos is not None:
        for path, frames in videos.written:
            print(f"wrote {path}: {frames} frame(s) at {videos.fps:.1f} fps")
    return 0


def _read_steps(
    args: argparse.Namespace, reader: ObservationReader, times: list[float]
) -> tuple[dict[int, dict[str, np.ndarray]], Videos | None]:
    """The sheet's rows (the ``--frames`` steps sampled, each camera fitted to the tile
    height) and, with ``--video``, every step written to the videos."""
    from vla_client.cli.sheet import fit_height

    chosen = set(sample(len(times), args.frames))
    rows: dict[int, dict[str, np.ndarray]] = {}
    with ExitStack() as stack:
        videos = None
        if args.video:
            videos = stack.enter_context(Videos(Path(args.video), step_rate(times)))
        for index, step in reader.read(None if videos else chosen):
            label = step_label(index, times)
            if videos is not None:
                videos.add(step.observation.images, label)
            if index in chosen:
                rows[index] = {
                    name: fit_height(frame, args.tile_height)
                    for name, frame in step.observation.images.items()
                }
    return rows, videos


def _to_rerun(args: argparse.Namespace) -> int:
    check_output_file(args.rerun, "--rerun")
    require_module("rerun", "--rerun")
    from vla_client.viz.rerun_recording import recording_to_rerun

    try:
        steps = recording_to_rerun(args.recording, args.rerun)
    except RecordingError as exc:
        return fail(str(exc))
    print(f"wrote {args.rerun}: {steps} step(s) of {args.recording}")
    return 0


def sample(total: int, count: int) -> list[int]:
    """`count` step positions spread evenly over `total` steps, first and last included."""
    if total <= count:
        return list(range(total))
    import numpy as np

    return sorted({round(x) for x in np.linspace(0, total - 1, count)})


def step_label(index: int, times: Sequence[float]) -> str:
    """``#12  +1.20 s``: the step's sequence number and its time since the first step."""
    return f"#{index}  +{times[index] - times[0]:.2f} s"


def step_rate(times: Sequence[float]) -> float:
    """Steps per second: the inverse of the median gap between steps (10 with no gap)."""
    gaps = [later - earlier for earlier, later in itertools.pairwise(times) if later > earlier]
    return 1.0 / statistics.median(gaps) if gaps else DEFAULT_FPS


def contact_sheet(
    name: str, rows: dict[int, dict[str, np.ndarray]], times: Sequence[float]
) -> np.ndarray:
    """The sheet: a title bar, then per step a row of labelled tiles, one column per camera.

    `rows` maps step positions to their frames, already fitted to the tile height.
    """
    from vla_client.cli.sheet import sheet

    widths: dict[str, int] = {}  # camera -> column width, in order of first appearance
    for images in rows.values():
        for camera, fitted in images.items():
            widths[camera] = max(widths.get(camera, 0), fitted.shape[1])
    tiles = [
        [
            _labelled(images[camera], [step_label(index, times), camera])
            if camera in images
            else None
            for camera in widths
        ]
        for index, images in rows.items()
    ]
    when = datetime.fromtimestamp(times[0]).astimezone().isoformat(timespec="seconds")
    span = times[-1] - times[0]
    title = f"{Path(name).name}: {len(times)} step(s) over {span:.2f} s from {when}"
    return sheet(tiles, list(widths.values()), title)


def _labelled(image: np.ndarray, lines: list[str]) -> np.ndarray:
    from vla_client.cli.sheet import draw_label

    tile: np.ndarray = image.copy()
    draw_label(tile, lines)
    return tile


class Videos:
    """One MP4 per camera in `folder` at `fps`, written as steps come; a camera's frames keep
    the size of its first one. `written` lists each file and its frame count once closed."""

    def __init__(self, folder: Path, fps: float) -> None:
        self.folder = folder
        self.fps = fps
        self.written: list[tuple[Path, int]] = []
        self._open: dict[str, _Video] = {}

    def add(self, images: Mapping[str, np.ndarray], label: str) -> None:
        """One step: each camera's frame, labelled, appended to that camera's video."""
        import cv2

        from vla_client.cli.sheet import draw_label

        for camera, frame in images.items():
            video = self._open.get(camera) or self._start(camera, frame)
            if (frame.shape[1], frame.shape[0]) != video.size:
                frame = cv2.resize(frame, video.size)
            bgr = cv2.cvtColor(frame, cv2.COLOR_RGB2BGR)
            draw_label(bgr, [label, camera])
            video.writer.write(bgr)
            video.frames += 1

    def _start(self, camera: str, frame: np.ndarray) -> _Video:
        import cv2

        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{_file_name(camera, self._open)}.mp4"
        size = (frame.shape[1], frame.shape[0])
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), self.fps, size)
        if not writer.isOpened():
            raise RecordingError(f"cannot write the video {path} (no MPEG-4 encoder in OpenCV?)")
        self._open[camera] = video = _Video(writer, path, size)
        return video

    def close(self) -> None:
        for video in self._open.values():
            video.writer.release()
            self.written.append((video.path, video.frames))
        self._open.clear()

    def __enter__(self) -> Videos:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class _Video:
    writer: cv2.VideoWriter
    path: Path
    size: tuple[int, int]
    frames: int = 0


def _file_name(camera: str, taken: Mapping[str, _Video]) -> str:
    """`camera` as a safe file name that no other camera of this recording has taken."""
    name = base = re.sub(r"[^A-Za-z0-9_-]", "_", camera) or "camera"
    used = {video.path.stem for video in taken.values()}
    n = 1
    while name in used:
        n += 1
        name = f"{base}-{n}"
    return name

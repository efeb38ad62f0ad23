"""``vla-client export``: write a recording as a LeRobot dataset (format v3.0).

``vla-client export run.vlaobs --lerobot datasets/run`` reads a recording made by a control loop
(``ControlLoop(record=writer.record)`` or ``vla-client eval --record``: each step holds the
action applied on its tick and its episode) or by a server's ``--record`` (each step holds the
chunk it served; the action is its row 0) and writes it with LeRobot's own ``LeRobotDataset``
writer, one frame per step, episodes and tasks kept. The folder must be new or empty (missing
parent folders are made); it is written whole or not at all. Frames go in as video where LeRobot
can decode video here, else as PNG images (``--images``/``--videos`` choose). Steps no action
was taken on (a control loop's or ``vla-client eval --record``'s ticks before the first chunk)
are left out and counted; a file with no action at all (``vla-client record``'s) is refused,
naming what made it and how to get actions; one cut off inside its last step exports its whole
steps and says what was dropped.
Needs lerobot 0.4, installed beside vla-client with CPU torch as docs/install.md#lerobot shows.
"""

from __future__ import annotations

import argparse

from vla_client.cli.failures import failure_line
from vla_client.cli.output import fail
from vla_client.cli.parser import positive_int
from vla_client.errors import VLAClientError
from vla_client.lerobot.limits import MAX_FPS, REPO_ID
from vla_client.protocol.names import RECORDING_SUFFIX as SUFFIX


def register(parser: argparse.ArgumentParser) -> None:
    """The command's options, on its `parser`."""
    parser.add_argument("recording", metavar=f"FILE{SUFFIX}", help="the recording to read")
    parser.add_argument(
        "--lerobot", required=True, metavar="DIR",
        help="write a LeRobotDataset v3.0 into this new (or empty) folder",
    )  # fmt: skip
    parser.add_argument(
        "--repo-id", type=repo_id, metavar="OWNER/NAME",
        help="the dataset's repo id (default: local/<DIR's name>)",
    )  # fmt: skip
    parser.add_argument(
        "--fps", type=frame_rate, metavar="N",
        help=f"frames per second, 1..{MAX_FPS} (default: the recording's fps, as its header "
        "says)",
    )  # fmt: skip
    parser.add_argument(
        "--task", type=task_text, metavar="TEXT", help="the task of steps recorded without one"
    )
    storage = parser.add_mutually_exclusive_group()
    storage.add_argument(
        "--images", dest="videos", action="store_false", default=None,
        help="store frames as lossless PNG images (default: video where LeRobot can read "
        "video back here, else images)",
    )  # fmt: skip
    storage.add_argument(
        "--videos", dest="videos", action="store_true", default=None,
        help="store frames as LeRobot's default AV1 video, even where it cannot be read back here",
    )  # fmt: skip
    parser.set_defaults(func=run)


def frame_rate(text: str) -> int:
    """An argparse type: a whole number of frames a second, 1..`MAX_FPS`."""
    fps = positive_int(text)
    if fps > MAX_FPS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_FPS}, got {text!r}")
    return fps


def repo_id(text: str) -> str:
    """An argparse type: ``owner/name``."""
    if not REPO_ID.match(text):
        raise argparse.ArgumentTypeError(
            f"must be OWNER/NAME (letters, digits, '_', '-', '.'), got {text!r}"
        )
    return text


def task_text(text: str) -> str:
    """An argparse type: a task that says something."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must be a task in words, got an empty one")
    return text


def run(args: argparse.Namespace) -> int:
    from vla_client.lerobot.dataset import export_lerobot_dataset

    try:
        summary = export_lerobot_dataset(
            args.recording, args.lerobot, repo_id=args.repo_id, fps=args.fps,
            task=args.task, videos=args.videos,
        )  # fmt: skip
    except (VLAClientError, ValueError, OSError, ImportError) as exc:
        return fail(failure_line(exc, args))
    print(
        f"exported {summary.frames} frame(s) in {summary.episodes} episode(s) and "
        f"{len(summary.tasks)} task(s) at {summary.fps} fps to {summary.root} "
        f"(repo id {summary.repo_id})"
    )
    if summary.images_because:
        print(f"frames stored as PNG images, not video: {summary.images_because}")
    if summary.dropped:
        print(f"dropped the end of the recording: {summary.dropped}")
    if summary.no_action:
        print(
            f"left out {summary.no_action} step(s) no action was taken on (ticks before the "
            "first chunk came, or while the robot waited for one)"
        )
    if summary.served_actions:
        print(
            f"{summary.served_actions} frame(s) had no applied action recorded: their action is "
            "row 0 of the chunk the server returned"
        )
    return 0

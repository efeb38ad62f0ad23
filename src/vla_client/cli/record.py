"""``vla-client record``: record observations to a file, to replay later with ``send --obs``.

Frames come from live cameras, a video, image files or synthetic cameras, read at ``--rate`` Hz
(as fast as the source gives them when 0). Each observation keeps its frames (lossless PNG, raw
with ``--raw``, or lossy JPEG with ``--jpeg``), state, task, per-camera capture times and the
time it was recorded. What a step costs is mostly its frames: three synthetic 360x640 cameras
take about 1.2 MB a step as PNG, 2.1 MB raw, 0.11 MB as JPEG. The file replays to any server,
at its recorded pace if asked: ``vla-client send URL --obs FILE --rate recorded --save-actions
actions.npz``; ``vla-client view FILE`` shows its frames. The output file's folder is checked
before any camera opens.
"""

from __future__ import annotations

import argparse
import time

from vla_client.cli.checks import check_output_file, file_type
from vla_client.cli.failures import failure_line
from vla_client.cli.output import fail
from vla_client.cli.parser import non_negative_float, positive_int
from vla_client.cli.progress import Progress
from vla_client.cli.sources import add_source_options, open_source
from vla_client.errors import VLAClientError
from vla_client.protocol.names import RECORDING_SUFFIX as SUFFIX


def register(parser: argparse.ArgumentParser) -> None:
    """The command's options, on its `parser`."""
    parser.add_argument(
        "output", metavar=f"FILE{SUFFIX}", type=file_type(SUFFIX), help="the recording to write"
    )
    add_source_options(parser, recording=False)
    parser.add_argument(
        "--frames", type=positive_int, default=10, metavar="N", help="observations to record"
    )
    parser.add_argument(
        "--rate", type=non_negative_float, default=10.0, metavar="HZ",
        help="observations per second, 0 for as fast as the source gives them",
    )  # fmt: skip
    stored = parser.add_mutually_exclusive_group()
    stored.add_argument(
        "--raw", action="store_true", help="store raw pixels instead of PNG (bigger, faster)"
    )
    stored.add_argument(
        "--jpeg", action="store_true",
        help="store JPEG frames (quality 90) instead of PNG: several times smaller, lossy (for "
        "looking at or replaying roughly; depth stays lossless)",
    )  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vla_client.recording import ObservationWriter

    period = 1.0 / args.rate if args.rate else 0.0
    try:
        check_output_file(args.output, "the recording")
        with (
            open_source(args) as source,
            ObservationWriter(
                args.output,
                image_format="raw" if args.raw else "jpeg" if args.jpeg else "png",
                task=args.task,
                source="record",
            ) as writer,
            Progress(args.frames, label="record") as bar,
        ):
            due: float | None = None  # the first frame at once; the beat starts from it
            for _ in range(args.frames):
                if due is not None:
                    time.sleep(max(0.0, due - time.monotonic()))
                writer.write(next(source.observations))
                due = next_due(due, period, time.monotonic())
                bar.advance()
    except (VLAClientError, ValueError, OSError) as exc:
        return fail(failure_line(exc, args))
    print(f"recorded {writer.count} observation(s) to {args.output}")
    return 0


def next_due(due: float | None, period: float, now: float) -> float:
    """When the next frame is due: `period` after this one was due, so the rate holds on
    average. After the first frame (slow: the source is starting) or a frame more than a
    period late, the beat starts again from `now`, so that no frames are taken back to back
    to catch up."""
    if due is None or due + period < now:
        return now + period
    return due + period

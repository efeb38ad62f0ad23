"""``vla-client record``: record observations to a file, to replay later with ``send --obs``.

Frames come from live cameras, a video, image files or synthetic cameras, read at ``--rate`` Hz
(as fast as the source gives them when 0). Each observation keeps its frames (lossless PNG, or
raw with ``--raw``), state, task and per-camera capture times. The file replays to any server:
``vla-client send URL --obs FILE --save-actions actions.npz``.
"""

from __future__ import annotations

import argparse
import time

from vla_client.cli.output import fail, os_error_message
from vla_client.cli.progress import Progress
from vla_client.cli.sources import add_source_options, open_source
from vla_client.errors import VLAClientError
from vla_client.recording import ObservationWriter


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "record",
        help="record observations to a file for replay",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("output", metavar="FILE", help="the recording to write (e.g. run.vlaobs)")
    add_source_options(parser, recording=False)
    parser.add_argument("--frames", type=int, default=10, help="observations to record")
    parser.add_argument(
        "--rate", type=float, default=10.0, help="observations per second (0: as fast as possible)"
    )
    parser.add_argument(
        "--raw", action="store_true", help="store raw pixels instead of PNG (bigger, faster)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.frames < 1:
        return fail("--frames must be at least 1")
    if args.rate < 0:
        return fail("--rate must be 0 or more")
    period = 1.0 / args.rate if args.rate else 0.0
    try:
        with (
            open_source(args) as source,
            ObservationWriter(
                args.output, image_format="raw" if args.raw else "png", task=args.task
            ) as writer,
            Progress(args.frames, label="record") as bar,
        ):
            due = time.monotonic()
            for _ in range(args.frames):
                time.sleep(max(0.0, due - time.monotonic()))
                due += period
                writer.write(next(source.observations))
                bar.advance()
    except (VLAClientError, ValueError) as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(os_error_message(exc))
    print(f"recorded {writer.count} observation(s) to {args.output}")
    return 0

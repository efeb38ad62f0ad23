"""``--rerun [FILE.rrd]``: log a ``send`` or ``eval`` run to Rerun (`vla_client.viz.RerunLog`).

Without a file it spawns a Rerun viewer (or streams to the one running); with a file ending in
``.rrd`` (or a ``rerun+http://`` viewer URL) it writes there. The file's folder and the rerun
library are checked before any work starts. A robot without a screen streams to a viewer on
another machine, ``--rerun rerun+http://HOST:9876/proxy`` (``rerun`` run there listens on
9876); the error for a viewer that cannot be shown here says so.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from vla_client.cli.checks import check_output_file, require_module

if TYPE_CHECKING:
    from vla_client.viz.rerun_log import RerunLog

VIEWER = "viewer"
"""What ``--rerun`` given alone stands for."""
STREAM_ELSEWHERE = (
    "or stream to a viewer on a machine with a screen: run 'rerun' there and give "
    "--rerun rerun+http://HOST:9876/proxy (HOST: that machine's address)"
)


def add_rerun_option(parser: argparse._ActionsContainer) -> None:
    parser.add_argument(
        "--rerun", nargs="?", const=VIEWER, default=None, metavar="FILE.rrd|URL",
        help="log frames sent, state, actions, each chunk as a plan, latencies and events to "
        "Rerun: to FILE.rrd, to a viewer it spawns when no file is given, or, from a robot "
        "without a screen, to a viewer on another machine: --rerun "
        "rerun+http://HOST:9876/proxy, with 'rerun' running there; a file holds each frame "
        "uncompressed, about 0.7 MB a step per 360x640 camera "
        "(pip install 'vla-client[rerun]')",
    )  # fmt: skip


def check_rerun(args: argparse.Namespace) -> None:
    """The target's folder and the rerun library, before any work (`ValueError`)."""
    target = args.rerun
    if target is None:
        return
    require_module("rerun", "--rerun")
    if target != VIEWER and not target.startswith(("rerun://", "rerun+http")):
        if not target.lower().endswith(".rrd"):
            raise argparse.ArgumentError(None, f"--rerun takes a .rrd file, got {target!r}")
        check_output_file(target, "--rerun")


@contextlib.contextmanager
def rerun_log(args: argparse.Namespace, **options: object) -> Iterator[RerunLog | None]:
    """The log ``--rerun`` asks for (None without it), closed on the way out."""
    if args.rerun is None:
        yield None
        return
    from vla_client.viz.rerun_log import RerunLog

    try:
        log = RerunLog(None if args.rerun == VIEWER else args.rerun, **options)  # type: ignore[arg-type]
    except ValueError as exc:
        if args.rerun != VIEWER:
            raise
        raise ValueError(f"{exc}; {STREAM_ELSEWHERE}") from None  # no viewer here: no display
    with log:
        yield log

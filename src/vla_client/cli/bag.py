"""``--bag PATH --topic TOPIC=NAME``: a ROS 2 bag as the frame source of ``send`` and ``record``.

Each ``--topic`` names a camera topic and the camera name it is sent under, or the JointState
topic whose positions are the state (``--topic /joint_states=state``). Frames are synchronised
by header stamps (`vla_client.cameras.ros_bag.BagSource`): the first camera topic leads and every
other topic must have a message within ``--max-skew-ms`` of it. Like a recording, a bag replays
in order and loops; ``send --rate recorded`` keeps the pace of its stamps.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterator

import numpy as np

from vla_client.cameras.ros_bag import STATE, BagSource
from vla_client.cli.parser import positive_float
from vla_client.observation import Observation

DEFAULT_MAX_SKEW_MS = 50.0


def add_bag_options(group: argparse._ActionsContainer) -> None:
    """``--bag``, ``--topic`` (repeatable) and ``--max-skew-ms``."""
    group.add_argument(
        "--bag", metavar="PATH",
        help="replay a ROS 2 bag (a folder with metadata.yaml, or its .db3/.mcap file); "
        "needs --topic (pip install 'vla-client[ros]')",
    )  # fmt: skip
    group.add_argument(
        "--topic", type=topic_pair, action="append", default=[], metavar="TOPIC=NAME",
        help=f"with --bag: a camera topic and its camera name, or TOPIC={STATE} for the "
        "JointState topic (repeatable; the first camera topic leads the synchronisation)",
    )  # fmt: skip
    group.add_argument(
        "--max-skew-ms", type=positive_float, default=DEFAULT_MAX_SKEW_MS, metavar="MS",
        help="with --bag: the furthest a topic's message may be from the leading camera's",
    )  # fmt: skip


def topic_pair(text: str) -> tuple[str, str]:
    """An argparse type: ``/camera/image_raw=wrist``."""
    topic, sep, name = text.rpartition("=")
    if not sep or not topic or not name:
        raise argparse.ArgumentTypeError(
            f"takes TOPIC=NAME, such as /camera/image_raw=wrist; got {text!r}"
        )
    return topic, name


def check_bag_args(args: argparse.Namespace) -> None:
    """`--topic` goes with `--bag` and `--bag` needs one per camera; usage errors otherwise."""
    if args.topic and not args.bag:
        raise argparse.ArgumentError(None, "--topic names the topics of a --bag; add --bag PATH")
    if args.bag:
        _check_topics(args.topic, state_given=args.state is not None)


def _check_topics(pairs: list[tuple[str, str]], *, state_given: bool) -> None:
    """The ``--topic TOPIC=NAME`` pairs of a bag: each topic once, at least one camera, and
    the state from a topic or ``--state``, not both."""
    topics = [topic for topic, _ in pairs]
    if len(set(topics)) != len(topics):
        raise argparse.ArgumentError(None, "--topic names a topic twice")
    if not any(name != STATE for _, name in pairs):
        raise argparse.ArgumentError(
            None, f"--bag needs a camera topic: add --topic TOPIC=NAME (TOPIC={STATE} is the state)"
        )
    if state_given and any(name == STATE for _, name in pairs):
        raise argparse.ArgumentError(None, f"give the state once: --state or --topic TOPIC={STATE}")


def open_bag(args: argparse.Namespace, state: np.ndarray | None) -> BagSource:
    """The bag the options name, read; `state` (``--state``'s) goes with every step when no
    topic gives one."""
    return BagSource(
        args.bag, dict(args.topic), max_skew_s=args.max_skew_ms / 1e3, task=args.task, state=state
    )


def replay(bag: BagSource) -> Iterator[Observation]:
    """The bag's steps in order, back to the first after the last, endlessly."""
    for _ in itertools.count():
        yield from bag

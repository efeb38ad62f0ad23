"""``vla-client ros2``: drive a ROS 2 robot from a policy server, as a node on its graph.

Joins an rmw_zenoh graph (no ROS install: a Zenoh session that follows rmw_zenoh's conventions)
as the node ``vla_client``: subscribes to the camera topics (``--image TOPIC=NAME``; a topic
ending in ``/compressed`` carries CompressedImage, any other Image) and the JointState topic
(``--state``), synchronises them by header stamps (``--max-skew-ms``), sends them to the server
at ``--url`` through the chunk executor (``--mode``), the safety gate and, with ``--watchdog``,
a watchdog, and publishes the commands on ``--command``: one ``std_msgs/Float64MultiArray`` a
tick (``--command-type array``, forward_command_controller) or a ``trajectory_msgs/
JointTrajectory`` whenever a chunk starts (``--command-type trajectory``,
joint_trajectory_controller). With no input fresher than ``--max-age-ms``, or no chunk from the
server, it publishes no command (the controller holds) and says why on the status topic
(``/diagnostics``) and in the log; it resumes by itself. Ctrl-C or SIGTERM stops it: nothing more
is published, the node leaves the graph, exit 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

from vla_client.cli import control_options
from vla_client.cli.checks import require_module
from vla_client.cli.common import (
    add_encoding_options,
    add_fit_options,
    add_wait_option,
    check_transport_installed,
    client_options,
    server_metadata,
    server_url,
)
from vla_client.cli.control_options import (
    add_chunk_options,
    add_gate_options,
    add_watchdog_options,
    rate_hz,
)
from vla_client.cli.parser import non_negative_int, positive_float, positive_int, seconds
from vla_client.cli.server_wait import wait_for_server
from vla_client.control.names import EXECUTION_MODES, MAX_REFUSALS
from vla_client.errors import VLAClientError
from vla_client.protocol.endpoints import API_KEY_ENV

if TYPE_CHECKING:  # imported where used: the options are parsed without numpy or pydantic
    from vla_client.client import ActionClient
    from vla_client.control.chunk import ChunkExecutor
    from vla_client.control.clocks import Clock
    from vla_client.control.safety import SafetyGate
    from vla_client.protocol import ActionMetadata

log = logging.getLogger(__name__)

DEFAULT_ROUTER = "tcp/localhost:7447"
"""rmw_zenohd's endpoint (`ros2 run rmw_zenoh_cpp rmw_zenohd`)."""
DOMAIN_ENV = "ROS_DOMAIN_ID"
NODE_NAME = "vla_client"
INSTALL_ROS2 = "pip install 'vla-client[ros2]'"
_TOPIC = re.compile(r"^/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$")


def register(parser: argparse.ArgumentParser) -> None:
    """The command's options, on its `parser`."""
    server = parser.add_argument_group("the server")
    server.add_argument("--url", type=server_url, required=True, help="the policy server's URL")
    server.add_argument(
        "--timeout", type=seconds, default=5.0, metavar="SECONDS",
        help="how long to wait for a reply (the loop goes on meanwhile)",
    )  # fmt: skip
    add_wait_option(server)
    server.add_argument(
        "--api-key", default=None,
        help=f"sent as 'Authorization: Bearer KEY' (default: ${API_KEY_ENV}, else no key)",
    )  # fmt: skip
    add_encoding_options(parser)
    add_fit_options(parser)
    robot = parser.add_argument_group("the robot's topics")
    robot.add_argument(
        "--image", type=topic_pair, action="append", required=True, metavar="TOPIC=NAME",
        help="a camera topic and the camera name the server knows (repeatable; the first is "
        "the one the others are synchronised to; TOPIC/compressed is a CompressedImage)",
    )  # fmt: skip
    robot.add_argument("--state", type=topic, required=True, metavar="TOPIC",
                       help="the sensor_msgs/JointState topic")  # fmt: skip
    robot.add_argument("--command", type=topic, required=True, metavar="TOPIC",
                       help="the controller's command topic")  # fmt: skip
    robot.add_argument(
        "--command-type", choices=("array", "trajectory"), required=True,
        help="array: std_msgs/Float64MultiArray a tick (forward_command_controller); "
        "trajectory: trajectory_msgs/JointTrajectory a chunk (joint_trajectory_controller)",
    )  # fmt: skip
    robot.add_argument(
        "--joints", type=joint_list, default=None, metavar="J1,J2,...",
        help="the JointState's joints sent as the state, in this order (default: all, in the "
        "message's order); a trajectory names these",
    )  # fmt: skip
    robot.add_argument("--task", default="", help="the task text sent with every observation")
    robot.add_argument(
        "--max-skew-ms", type=positive_float, default=50.0, metavar="MS",
        help="frames and state further apart than this (header stamps) are not sent together",
    )  # fmt: skip
    robot.add_argument(
        "--max-age-ms", type=positive_float, default=500.0, metavar="MS",
        help="with no input fresher than this, publish no command (the controller holds)",
    )  # fmt: skip
    robot.add_argument(
        "--status-topic", type=topic, default="/diagnostics", metavar="TOPIC",
        help="where the node's diagnostic_msgs/DiagnosticArray status goes",
    )  # fmt: skip
    graph = parser.add_argument_group("the ROS 2 graph")
    graph.add_argument(
        "--router", default=DEFAULT_ROUTER, metavar="tcp/HOST:PORT",
        help="the Zenoh router (rmw_zenohd) to connect to",
    )  # fmt: skip
    graph.add_argument(
        "--domain", type=non_negative_int, default=None, metavar="N",
        help=f"the ROS domain id (default: ${DOMAIN_ENV}, else 0)",
    )  # fmt: skip
    loop = parser.add_argument_group("the loop")
    loop.add_argument("--rate", type=rate_hz, default=30.0, metavar="HZ",
                      help="control ticks per second (0.1..1000)")  # fmt: skip
    loop.add_argument("--mode", choices=EXECUTION_MODES, default="aligned",
                      help="how chunks are played (rtc: when the server announces it)")  # fmt: skip
    add_chunk_options(loop)
    loop.add_argument(
        "--max-refusals", type=positive_int, default=MAX_REFUSALS, metavar="N",
        help="requests the server may refuse in a row (4xx) before the node stops; until "
        f"then it holds and asks again each tick (default {MAX_REFUSALS})",
    )  # fmt: skip
    add_watchdog_options(loop)
    add_gate_options(parser)
    parser.set_defaults(func=run)


def topic(text: str) -> str:
    """An argparse type: a ROS topic name (``/camera/image_raw``)."""
    if not _TOPIC.match(text):
        raise argparse.ArgumentTypeError(
            f"takes a ROS topic name such as /camera/image_raw (letters, digits, _ and /), "
            f"got {text!r}"
        )
    return text if text.startswith("/") else f"/{text}"


def topic_pair(text: str) -> tuple[str, str]:
    """An argparse type: ``TOPIC=NAME``, a camera topic and the server's camera name."""
    name_of, sep, name = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f"takes TOPIC=NAME, as in /camera/image_raw=wrist; got {text!r}"
        )
    return topic(name_of), name


def joint_list(text: str) -> tuple[str, ...]:
    """An argparse type: ``j1,j2,...``, joint names, each once."""
    names = tuple(part.strip() for part in text.split(","))
    if not all(names) or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"takes joint names separated by commas, each once, as in joint1,joint2; got {text!r}"
        )
    return names


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    from vla_client.client import ActionClient
    from vla_client.control.watchdog import Watchdog
    from vla_client.ros2.bridge import RosBridge
    from vla_client.ros2.graph import Node

    domain = _domain(args)
    try:
        node = Node(NODE_NAME, domain_id=domain, router=args.router)
    except ValueError as exc:
        raise argparse.ArgumentError(None, f"--router or --domain: {exc}") from None
    stopping = threading.Event()
    try:
        wait_for_server(args.url, args.wait_for_server)  # after joining: no router is said at once
        with ActionClient(args.url, **client_options(args)) as client:
            metadata = server_metadata(client)
            gate_options = control_options.gate_options(args)
            gate = _gate(metadata, gate_options, None)
            executor = _executor(args, client, metadata, gate)
            bridge = RosBridge(
                node,
                executor,
                images=dict(args.image),
                state=args.state,
                command=args.command,
                command_type=args.command_type,
                rate_hz=args.rate,
                joints=args.joints,
                max_skew_s=args.max_skew_ms / 1e3,
                max_age_s=args.max_age_ms / 1e3,
                task=args.task,
                status_topic=args.status_topic,
                point_gate=lambda clock: _gate(metadata, gate_options, clock),
                hardware_id=args.url,
            )
            watchdog = (
                None if args.watchdog is None else Watchdog(args.watchdog, args.watchdog_behaviour)
            )
            loop = bridge.control_loop(gate=gate, watchdog=watchdog)
            print(
                f"vla-client ros2: node /{NODE_NAME} on {args.router} (domain {domain}): "
                f"{len(args.image)} camera(s) and {args.state} to {args.url}, "
                f"{args.command_type} commands on {args.command} at {args.rate:g} Hz; "
                f"status on {args.status_topic}; Ctrl-C stops",
                flush=True,
            )

            def stop() -> None:
                stopping.set()
                bridge.stop()

            with _stopped_by_signals(stop):
                try:
                    if bridge.wait_for_input(stopping.is_set):
                        loop.run()
                except (VLAClientError, ValueError) as exc:
                    bridge.fail(str(exc))
                    raise
                finally:
                    executor.close(timeout=1.0)
    finally:
        node.close()
    if stopping.is_set():
        print("vla-client ros2: stopped; the node has left the graph", flush=True)
    return 0


def _check_args(args: argparse.Namespace) -> None:
    for module in ("zenoh", "rosbags"):
        try:
            require_module(module, "vla-client ros2")
        except ValueError:
            raise ValueError(
                f"vla-client ros2 needs the 'ros2' extra ({module} is not installed): "
                f"{INSTALL_ROS2}"
            ) from None
    cameras = [name for _, name in args.image]
    topics = [image_topic for image_topic, _ in args.image]
    if len(set(cameras)) != len(cameras) or len(set(topics)) != len(topics):
        raise argparse.ArgumentError(None, "--image names each topic and each camera once")
    if args.mode == "rtc" and args.prefetch_at is not None:
        raise argparse.ArgumentError(
            None, "--prefetch-at is not for --mode rtc (it asks every execution horizon)"
        )
    if args.max_skew_ms >= args.max_age_ms:
        raise argparse.ArgumentError(
            None,
            f"--max-skew-ms {args.max_skew_ms:g} is not below --max-age-ms {args.max_age_ms:g}: "
            "a set of frames that far apart would always be stale",
        )
    check_transport_installed(args.url, args.layout)
    client_options(args)  # its usage errors now, before the node joins the graph


def _domain(args: argparse.Namespace) -> int:
    """``--domain``, else ``$ROS_DOMAIN_ID``, else 0."""
    if args.domain is not None:
        return int(args.domain)
    text = os.environ.get(DOMAIN_ENV, "").strip()
    if not text:
        return 0
    if not text.isdigit():
        raise argparse.ArgumentError(
            None, f"${DOMAIN_ENV} is {text!r}: set it to a whole number, or give --domain N"
        )
    return int(text)


def _gate(
    metadata: ActionMetadata | None, options: dict[str, Any], clock: Clock | None
) -> SafetyGate:
    """The safety gate the options describe, sized by the server's metadata where it has some
    (`ValueError` from the gate: a usage error)."""
    from vla_client.control.safety import SafetyGate

    try:
        if metadata is not None:
            return SafetyGate.from_metadata(metadata, clock=clock, **options)
        return SafetyGate(clock=clock, **options)
    except ValueError as exc:
        raise argparse.ArgumentError(None, f"the safety gate options: {exc}") from None


def _executor(
    args: argparse.Namespace,
    client: ActionClient,
    metadata: ActionMetadata | None,
    gate: SafetyGate,
) -> ChunkExecutor:
    from vla_client.control.chunk import ChunkExecutor

    horizon = None if metadata is None else metadata.output.action_horizon
    _check_joints(args, None if metadata is None else metadata.output.action_dim)
    options: dict[str, Any] = {}
    if args.mode == "rtc":
        options["server"] = metadata
    else:
        options["prefetch_at"] = _prefetch_at(args.prefetch_at, horizon)
    if args.mode == "blended":
        options["blend_steps"] = args.blend_steps
    return ChunkExecutor(
        client.infer,
        mode=args.mode,
        max_observation_age_s=args.max_age_ms / 1e3,
        max_refusals=args.max_refusals,
        validate=gate.check_chunk,
        clock=time.time,
        **options,
    )


def _check_joints(args: argparse.Namespace, action_dim: int | None) -> None:
    """`ArgumentError` for ``--joints`` naming other than one joint per action value."""
    if args.joints is not None and action_dim is not None and action_dim != len(args.joints):
        raise argparse.ArgumentError(
            None,
            f"--joints names {len(args.joints)} joints, the server at {args.url} gives actions "
            f"of {action_dim} values: a command needs one value per joint",
        )


def _prefetch_at(given: int | None, horizon: int | None) -> int:
    """The step at which the next chunk is asked for: `given`, or half the server's
    `horizon` (1 where it has none); `ArgumentError` for one not below the horizon."""
    prefetch = given if given is not None else (horizon or 2) // 2
    if horizon is not None and prefetch >= horizon:
        raise argparse.ArgumentError(
            None,
            f"--prefetch-at {prefetch} is not below the server's action horizon of "
            f"{horizon}: give 0..{horizon - 1}",
        )
    return prefetch


@contextmanager
def _stopped_by_signals(stop: Callable[[], None]) -> Iterator[None]:
    """SIGINT and SIGTERM call `stop` (instead of raising KeyboardInterrupt or ending the
    process) while the block runs; the previous handlers come back after it."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        sys.stdout.flush()

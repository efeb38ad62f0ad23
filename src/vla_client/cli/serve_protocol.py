"""The other server families' protocols ``vla-client serve`` speaks too: ``--protocol``.

``--protocol gr00t|vllm-omni|roboarena`` serves the policy to that family's own clients as
well (`vla_client.server.edge.families`), beside the action API and openpi's websocket:
GR00T's ZeroMQ socket on ``--protocol-port`` (5555, GR00T's, by default), vLLM-Omni's robot
websocket at ``/v1/realtime/robot/openpi`` and RoboArena's at ``/``, both on ``--port``.
``--state-split KEY=DIM`` (GR00T) and ``--action-split KEY=DIM`` (GR00T, vLLM-Omni) name the
parts the family's config announces, in the vector's order. Each is checked before anything
starts, against the policy too: a `ValueError` of one line naming the flag and the fix.
"""

from __future__ import annotations

import argparse
import importlib.util
from typing import TYPE_CHECKING

from vla_client.cli.common import state_part
from vla_client.cli.serve_policy import in_range

if TYPE_CHECKING:
    from vla_client.server.config import ProtocolSettings

PROTOCOL_NAMES = ("gr00t", "vllm-omni", "roboarena")
FAMILY_FLAGS = {
    "--protocol-port": ("gr00t",),
    "--state-split": ("gr00t",),
    "--action-split": ("gr00t", "vllm-omni"),
}
"""The options of some families only: flag -> the protocols that take it."""


def add_protocol_options(parser: argparse.ArgumentParser) -> None:
    """``--protocol`` and the options of the families it names, on `parser`."""
    add = parser.add_argument
    add(
        "--protocol",
        metavar="NAME",
        help="also speak a server family's protocol, for its own clients: gr00t (GR00T's "
        "ZeroMQ socket on --protocol-port; the 'gr00t' extra), vllm-omni (its websocket "
        "/v1/realtime/robot/openpi), roboarena (its websocket at /) (default: none)",
    )
    add(
        "--protocol-port",
        type=int,
        help="--protocol gr00t: the ZeroMQ socket's port, 1..65535 (default: 5555, GR00T's)",
    )
    for flag, what, who in (
        ("--state-split", "state", "gr00t"),
        ("--action-split", "action", "gr00t, vllm-omni"),
    ):
        add(
            flag,
            type=state_part,
            action="append",
            metavar="KEY=DIM",
            help=f"--protocol {who}: the next DIM values of the policy's {what} are the part "
            f"KEY the family's config announces, repeatable, in order (default: one part)",
        )


def protocol_settings(args: argparse.Namespace) -> ProtocolSettings | None:
    """The family the options name, checked; `ValueError` of one line naming the flag."""
    from vla_client.server.config import ProtocolSettings

    name = args.protocol
    _check_names(args, name)
    if name is None:
        return None
    if args.protocol_port is not None:
        in_range("--protocol-port", args.protocol_port, 1, 65535)
    if name == "gr00t" and importlib.util.find_spec("zmq") is None:
        raise ValueError("--protocol gr00t needs pyzmq: pip install 'vla-client[gr00t]'")
    return ProtocolSettings(
        name,
        port=args.protocol_port,
        state_split=_split("--state-split", args.state_split),
        action_split=_split("--action-split", args.action_split),
    )


def _check_names(args: argparse.Namespace, name: str | None) -> None:
    """`ValueError` for a family this server cannot speak, or a family's flag given without
    that family (or with no family at all)."""
    given = [flag for flag in FAMILY_FLAGS if getattr(args, flag[2:].replace("-", "_")) is not None]
    if name is not None and name not in PROTOCOL_NAMES:
        raise ValueError(f"--protocol must be one of {', '.join(PROTOCOL_NAMES)}, got {name!r}")
    refused = [flag for flag in given if name not in FAMILY_FLAGS[flag]]
    if refused:
        takers = " or ".join(f"--protocol {taker}" for taker in FAMILY_FLAGS[refused[0]])
        raise ValueError(f"{refused[0]} is for {takers}; drop it or serve that protocol")


def _split(flag: str, parts: list[tuple[str, int]] | None) -> dict[str, int] | None:
    if parts is None:
        return None
    keys = [key for key, _ in parts]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"{flag} names {repeated[0]!r} twice; name each part once")
    return dict(parts)

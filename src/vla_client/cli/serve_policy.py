"""The policy ``vla-client serve`` runs: its name, its options, and ``--list-policies``.

``--policy`` takes a built-in name (``reference``, ``replay``, ``torch``), the name an installed
plugin adds, or ``package.module:attribute`` (a `Policy` subclass, a factory or an instance; see
`vla_client.server.policies.loading`). Options reach it three ways, each checked before anything
starts:

- the shape and contract flags (``--action-horizon``, ``--cameras``, ``--state-dim``, ...) and
  the built-ins' file flags (``--replay-file``, ``--weights``) are the policy's keyword options
  of the same meaning (`POLICY_FLAGS`); one the policy does not take is refused, naming the
  built-ins that take it;
- ``--policy-config FILE`` (a JSON or TOML table), then ``--policy-option KEY=VALUE``
  (repeatable, values read as JSON where they parse), for anything else.

Every failure is a `ValueError` with one line naming the option; the caller exits 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vla_client.server.policy import Policy

MAX_SIZE = 10_000
MAX_IMAGE_SIDE = 8192
MIN_IMAGE_SIDE = 8  # what the client resizes to at the least

POLICY_FLAGS = {
    "--action-horizon": "action_horizon",
    "--action-dim": "action_dim",
    "--cameras": "camera_names",
    "--camera-alias": "camera_aliases",
    "--depth-camera": "depth_cameras",
    "--image-size": "image_size",
    "--require-image-size": "image_size_required",
    "--state-dim": "state_dim",
    "--replay-file": "path",
    "--weights": "weights",
}
"""Serve flags that are options of the policy: flag -> keyword the policy takes."""


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    """``--policy`` and every option of the policy, on `parser`."""
    add = parser.add_argument
    add(
        "--policy",
        default="reference",
        help="policy to serve: reference, replay, torch, an installed plugin's name, or "
        "package.module:attr (a Policy subclass or a factory, imported from the current "
        "directory first); --list-policies shows them "
        "(default: %(default)s)",
    )
    add(
        "--policy-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the policy, VALUE read as JSON where it parses; repeatable "
        "(default: none)",
    )
    add(
        "--policy-config",
        metavar="FILE",
        help="policy options, a JSON or TOML table (default: none)",
    )
    add(
        "--list-policies",
        action="store_true",
        help="print the policies available (built in and plugins, a broken one with its "
        "error) and exit (default: off)",
    )
    add(
        "--replay-file", help="recorded chunks, .npy/.npz (default: none; --policy replay needs it)"
    )
    add("--weights", help="state_dict file for --policy torch (default: seeded random weights)")
    add("--action-horizon", type=int, help="actions per chunk (default: the policy's; 16 built in)")
    add("--action-dim", type=int, help="values per action (default: the policy's; 7 built in)")
    add("--cameras", default="", help="comma-separated camera names required (default: any)")
    add(
        "--camera-alias",
        action="append",
        default=[],
        metavar="ALIAS=NAME",
        help="another name a client may send camera NAME under; repeatable (default: none)",
    )
    add(
        "--depth-camera",
        action="append",
        default=[],
        metavar="NAME=DTYPE",
        help="a depth camera the policy takes, its frames uint16 (millimetres) or float32 "
        "(metres); repeatable (default: none, depth frames are refused)",
    )
    add(
        "--image-size",
        metavar="HxW",
        help="frame size the policy announces, e.g. 224x224 (default: none announced)",
    )
    add(
        "--require-image-size",
        action="store_true",
        help="refuse frames of another size than --image-size (default: only announced)",
    )
    add("--state-dim", type=int, help="state values the policy takes (default: any)")


def list_policies() -> int:
    """Print every available policy: name, origin, and its summary or the error that keeps it
    from loading. Exit code 0 even when a plugin is broken: the listing is what was asked."""
    from vla_client.server.policies import POLICIES
    from vla_client.server.policies.loading import available_policies

    entries = available_policies(POLICIES)
    name_width = max(len(entry.name) for entry in entries)
    origin_width = max(len(entry.origin) for entry in entries)
    for entry in entries:
        about = f"error: {entry.error}" if entry.error else entry.summary
        print(f"{entry.name:<{name_width}}  {entry.origin:<{origin_width}}  {about}".rstrip())
    return 0


def build_policy(args: argparse.Namespace) -> Policy:
    """The policy the options name, built with its options; `ValueError`, one line, if not."""
    from vla_client.errors import PolicyLoadError
    from vla_client.server.policies import POLICIES
    from vla_client.server.policies.loading import (
        load_policy,
        option_names,
        parse_options,
        resolve_policy,
    )

    name = args.policy
    if name == "torch" and importlib.util.find_spec("torch") is None:
        raise ValueError("--policy torch needs the 'torch' extra: pip install 'vla-client[torch]'")
    flags = flag_options(args)
    others = parse_options(args.policy_option, args.policy_config)
    if ":" in name:
        import_from_working_directory()
    target, _ = resolve_policy(name)
    names = option_names(target)
    for flag, (key, _) in flags.items():
        if names.accepted is not None and key not in names.accepted:
            raise ValueError(_not_taken(flag, key, name, POLICIES))
    for flag in ("--replay-file", "--weights"):
        if flag in flags:
            readable_file(flag, flags[flag][1])
    options = dict(flags.values())
    both = sorted(set(options) & set(others))
    if both:
        flag = next(f for f, (key, _) in flags.items() if key == both[0])
        raise ValueError(f"{flag} and the policy options both set {both[0]!r}; give one")
    missing = sorted(names.required - set(options) - set(others))
    if missing:
        needed = {key: flag for flag, key in POLICY_FLAGS.items()}.get(missing[0])
        raise ValueError(f"--policy {name} needs {needed or f'--policy-option {missing[0]}=VALUE'}")
    try:
        policy = load_policy(name, {**options, **others})
    except PolicyLoadError as exc:
        files = [flag for flag in ("--replay-file", "--weights") if flag in flags]
        if files:
            raise ValueError(f"{files[0]} {flags[files[0]][1]}: {exc}") from None
        raise
    check_announced(policy, others, args.policy_option, args.policy_config)
    return policy


def check_announced(
    policy: Policy, others: dict[str, Any], pairs: list[str], config: str | None
) -> None:
    """A policy built from ``--policy-option``/``--policy-config`` values must announce what a
    client can read (``action_horizon=abc`` builds, then gives metadata no client reads): a
    `ValueError` naming the option that set the bad field, before the server starts."""
    if not others:
        return
    from vla_client.errors import ProtocolError
    from vla_client.server.policy import metadata_document

    try:
        metadata_document(policy.spec, model="check")
    except ProtocolError as exc:
        reason = str(exc).removeprefix("metadata ")
        key = next((key for key in others if key in reason), None)
        given = next((p for p in reversed(pairs) if p.partition("=")[0] == key), None)
        if given is None and config is not None:
            blame = f"--policy-config {config}"
        else:
            blame = f"--policy-option {given or ' '.join(pairs)}"
        raise ValueError(f"{blame}: the policy would announce {reason}") from None


def import_from_working_directory() -> None:
    """Put the current directory first on ``sys.path``, as uvicorn and ``python -m`` do, so
    ``--policy mymod:Policy`` finds ``./mymod.py`` without ``PYTHONPATH=.``. The directory is
    absolute: the worker process starts with this ``sys.path`` and imports the same module."""
    here = os.getcwd()
    if sys.path[:1] != [here]:
        sys.path.insert(0, here)


def flag_options(args: argparse.Namespace) -> dict[str, tuple[str, Any]]:
    """The policy flags given: flag -> (keyword, value), each checked but for the files
    (whether they are readable is checked once the policy is known to take them)."""
    given: dict[str, tuple[str, Any]] = {}

    def put(flag: str, value: Any) -> None:
        given[flag] = (POLICY_FLAGS[flag], value)

    for flag, value in (("--action-horizon", args.action_horizon), ("--action-dim",
                        args.action_dim), ("--state-dim", args.state_dim)):  # fmt: skip
        if value is not None:
            in_range(flag, value, 1, MAX_SIZE)
            put(flag, value)
    cameras = tuple(name.strip() for name in args.cameras.split(",") if name.strip())
    if len(set(cameras)) != len(cameras):
        raise ValueError(f"--cameras names a camera twice: {args.cameras}")
    if cameras:
        put("--cameras", cameras)
    if args.camera_alias:
        put("--camera-alias", camera_aliases(args.camera_alias, cameras))
    if args.depth_camera:
        put("--depth-camera", depth_cameras(args.depth_camera, cameras))
    if args.image_size is not None:
        put("--image-size", image_size(args.image_size))
    if args.require_image_size:
        if args.image_size is None:
            raise ValueError("--require-image-size needs --image-size")
        put("--require-image-size", True)
    for flag, path in (("--replay-file", args.replay_file), ("--weights", args.weights)):
        if path:
            put(flag, path)
    return given


def camera_aliases(pairs: list[str], cameras: tuple[str, ...]) -> dict[str, str]:
    """``ALIAS=NAME`` pairs as a map; each alias once, never a camera name itself, and naming
    one of `cameras` when those are fixed."""
    aliases: dict[str, str] = {}
    for pair in pairs:
        alias, sep, name = (part.strip() for part in pair.partition("="))
        if not sep or not alias or not name:
            raise ValueError(f"--camera-alias takes ALIAS=NAME, got {pair!r}")
        if alias in aliases:
            raise ValueError(f"--camera-alias gives {alias!r} twice")
        if alias == name or alias in cameras:
            raise ValueError(f"--camera-alias {pair}: {alias!r} is a camera name itself")
        if cameras and name not in cameras:
            raise ValueError(f"--camera-alias {pair}: {name!r} is not one of --cameras")
        aliases[alias] = name
    return aliases


def depth_cameras(pairs: list[str], cameras: tuple[str, ...]) -> dict[str, str]:
    """``NAME=DTYPE`` pairs as a map, DTYPE uint16 or float32; each name once and none of
    `cameras` (a camera is colour or depth)."""
    from vla_client.protocol.metadata_fields import DEPTH_DTYPES

    depth: dict[str, str] = {}
    for pair in pairs:
        name, sep, dtype = (part.strip() for part in pair.partition("="))
        if not sep or not name or dtype not in DEPTH_DTYPES:
            raise ValueError(f"--depth-camera takes NAME={'|'.join(DEPTH_DTYPES)}, got {pair!r}")
        if name in depth:
            raise ValueError(f"--depth-camera gives {name!r} twice")
        if name in cameras:
            raise ValueError(f"--depth-camera {pair}: {name!r} is one of --cameras (colour)")
        depth[name] = dtype
    return depth


def image_size(text: str) -> tuple[int, int]:
    """``HxW`` as (height, width), each in ``MIN_IMAGE_SIDE..MAX_IMAGE_SIDE``."""
    height, sep, width = text.lower().partition("x")
    if not sep or not height.strip().isdigit() or not width.strip().isdigit():
        raise ValueError(f"--image-size takes HEIGHTxWIDTH, e.g. 224x224, got {text!r}")
    size = (int(height), int(width))
    if not all(MIN_IMAGE_SIDE <= side <= MAX_IMAGE_SIDE for side in size):
        raise ValueError(
            f"--image-size sides must be in {MIN_IMAGE_SIDE}..{MAX_IMAGE_SIDE}, got {text!r}"
        )
    return size


def in_range(option: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:  # NaN fails too
        raise ValueError(f"{option} must be in {low:g}..{high:g}, got {value:g}")


def readable_file(option: str, path: str) -> None:
    file = Path(path)
    if not file.exists():
        raise ValueError(f"{option} {path}: no such file")
    if not file.is_file():
        raise ValueError(f"{option} {path}: not a file")
    if not os.access(file, os.R_OK):
        raise ValueError(f"{option} {path}: not readable")


def _not_taken(flag: str, key: str, name: str, builtins: dict[str, Any]) -> str:
    from vla_client.server.policies.loading import option_names

    takers = [
        other
        for other, factory in builtins.items()
        if key in (option_names(factory).accepted or ())
    ]
    hint = f" (only {', '.join(takers)} take{'s' if len(takers) == 1 else ''} it)" if takers else ""
    return f"{flag} does not apply to --policy {name}{hint}"

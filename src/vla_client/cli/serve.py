"""``vla-client serve``: run the reference action server."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys

API_KEY_ENV = "VLA_CLIENT_API_KEY"


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("serve", help="run the reference action server")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: loopback)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--policy", choices=("reference", "replay", "torch"), default="reference",
        help="policy to serve (default: reference)",
    )  # fmt: skip
    parser.add_argument("--replay-file", help="recorded chunks for --policy replay (.npy/.npz)")
    parser.add_argument("--weights", help="state_dict file for --policy torch (default: seeded)")
    parser.add_argument("--max-batch", type=int, default=8, help="requests per policy call")
    parser.add_argument(
        "--batch-wait-ms", type=float, default=0.0, help="how long a batch may wait to fill"
    )
    parser.add_argument(
        "--queue-size", type=int, default=32, help="requests queued or running before 503s"
    )
    parser.add_argument(
        "--in-process", action="store_true", help="run the policy in a thread, no worker process"
    )
    parser.add_argument(
        "--api-servers", type=int, default=1,
        help="entrypoint processes sharing the port and one inference worker (default: 1)",
    )  # fmt: skip
    parser.add_argument("--action-horizon", type=int, default=16)
    parser.add_argument("--action-dim", type=int, default=7)
    parser.add_argument(
        "--cameras",
        default="",
        help="comma-separated camera names the policy requires (default: any)",
    )
    parser.add_argument("--max-body-mb", type=float, default=64.0, help="largest request body")
    parser.add_argument(
        "--api-key",
        default=os.environ.get(API_KEY_ENV) or None,
        help=f"require 'Authorization: Bearer <key>' on every route but /health "
        f"(default: ${API_KEY_ENV}; prefer the variable, arguments show in ps)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from vla_client.server import ServerConfig, create_app, make_policy
    from vla_client.server.config import WorkerSettings, uvicorn_options

    try:
        policy = make_policy(args.policy, **_policy_options(args))
        worker = WorkerSettings(
            max_batch=args.max_batch, batch_wait_ms=args.batch_wait_ms, queue_size=args.queue_size
        )
        if not 1 <= args.api_servers <= 64:
            raise ValueError(f"--api-servers must be in 1..64, got {args.api_servers}")
        if args.api_servers > 1 and args.in_process:
            raise ValueError("--api-servers needs the worker process; drop --in-process")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    config = ServerConfig(
        host=args.host,
        port=args.port,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        api_key=args.api_key,
        worker=worker,
        in_process=args.in_process,
    )
    if args.api_key is None and not is_loopback(args.host):
        print(
            f"WARNING: serving on {args.host} without an API key: anyone who can reach this "
            f"port can drive the robot. Set {API_KEY_ENV} or pass --api-key "
            "(see docs/security.md).",
            file=sys.stderr,
        )
    if args.api_servers > 1:
        from vla_client.server.api_servers import serve
        from vla_client.server.worker import WorkerStartError

        try:
            serve(policy, config, args.api_servers, log_level="info")
        except WorkerStartError as exc:  # (a lone entrypoint reports this in uvicorn's startup)
            print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
            return 1
        return 0
    uvicorn.run(
        create_app(policy, config),
        host=args.host,
        port=args.port,
        log_level="info",
        **uvicorn_options(config),
    )
    return 0


def _policy_options(args: argparse.Namespace) -> dict[str, object]:
    cameras = tuple(name for name in args.cameras.split(",") if name)
    if args.policy == "replay":
        if not args.replay_file:
            raise ValueError("--policy replay needs --replay-file")
        return {"path": args.replay_file, "camera_names": cameras}
    options: dict[str, object] = {
        "action_horizon": args.action_horizon,
        "action_dim": args.action_dim,
        "camera_names": cameras,
    }
    if args.policy == "torch":
        options["weights"] = args.weights
    return options


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses, the only hosts safe without a key."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

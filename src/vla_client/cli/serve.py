"""``vla-client serve``: run the reference action server."""

from __future__ import annotations

import argparse



def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("serve", help="run the reference action server")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: loopback)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--policy", default="reference", help="policy to serve (default: reference)")
    parser.add_argument("--action-horizon", type=int, default=16)
    parser.add_argument("--action-dim", type=int, default=7)
    parser.add_argument(
        "--cameras", default="", help="comma-separated camera names the policy requires (default: any)"
    )
    parser.add_argument("--max-body-mb", type=float, default=64.0, help="largest request body")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from vla_client.server import ServerConfig, create_app, make_policy

    cameras = tuple(name for name in args.cameras.split(",") if name)
    policy = make_policy(
        args.policy,
        action_horizon=args.action_horizon,
        action_dim=args.action_dim,
        camera_names=cameras,
    )
    config = ServerConfig(
        host=args.host, port=args.port, max_body_bytes=int(args.max_body_mb * 1024 * 1024)
    )
    uvicorn.run(create_app(policy, config), host=args.host, port=args.port, log_level="info")
    return 0

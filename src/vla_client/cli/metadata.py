"""``vla-client metadata``: print the server's policy description."""

from __future__ import annotations

import argparse

from vla_client.cli.common import add_connection_options
from vla_client.cli.output import fail, print_json
from vla_client.client import ActionClient
from vla_client.errors import VLAClientError


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("metadata", help="show the server's policy metadata")
    add_connection_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        with ActionClient(args.url, timeout_s=args.timeout, api_key=args.api_key) as client:
            metadata = client.metadata()
    except VLAClientError as exc:
        return fail(str(exc))
    print_json(metadata.model_dump(mode="json"))
    return 0

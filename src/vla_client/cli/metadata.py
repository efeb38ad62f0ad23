"""``vla-client metadata``: print the server's policy description as one JSON document.

What the policy takes (camera names, image size, state size) and gives (action horizon and
dimension): ``GET /v1/actions/metadata``, or for a websocket URL the metadata frame the
server sends when the connection opens. ``client_checks`` says what a client checks and fits
before sending (the cameras it needs, the aliases it accepts, the state length, the frame
size and whether frames are resized to it), with the fit options given here. Pipe it to ``jq``
to pick out a field.
"""

from __future__ import annotations

import argparse

from vla_client.cli.common import (
    add_connection_options,
    add_fit_options,
    check_transport_installed,
    client_options,
)
from vla_client.cli.failures import failure_line
from vla_client.cli.output import fail, print_json
from vla_client.cli.server_wait import wait_for_server
from vla_client.client import ActionClient
from vla_client.errors import VLAClientError


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("metadata", help="show the server's policy metadata")
    add_connection_options(parser)
    add_fit_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        check_transport_installed(args.url, args.layout, args.endpoint)
        wait_for_server(args.url, args.wait_for_server)
        with ActionClient(args.url, **client_options(args)) as client:
            metadata = client.metadata()
            checks = client.checks(metadata)
    except VLAClientError as exc:
        return fail(failure_line(exc, args))
    print_json({**metadata.model_dump(mode="json"), "client_checks": checks})
    return 0

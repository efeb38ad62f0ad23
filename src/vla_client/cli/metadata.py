"""``vla-client metadata``: what the server's policy takes and gives, and what the client checks.

What the policy takes (camera names, image size, state size) and gives (action horizon and
dimension): ``GET /v1/actions/metadata``, or for a websocket URL the metadata frame the
server sends when the connection opens. It prints a summary to read, a line per subject;
``--json`` prints the whole document instead, with ``client_checks``: what a client checks and
fits before sending (the cameras it needs, the aliases it accepts, the state length, the frame
size and whether frames are resized to it), with the fit options given here. Pipe that to
``jq`` to pick out a field.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from vla_client.cli.common import (
    add_connection_options,
    add_fit_options,
    check_transport_installed,
    client_options,
)
from vla_client.cli.failures import failure_line
from vla_client.cli.output import fail, print_json
from vla_client.cli.server_wait import wait_for_server
from vla_client.errors import VLAClientError

SUMMARISED = frozenset({"object", "model", "model_path", "policy_family", "input", "output",
                        "defaults", "capabilities", "server", "policy"})  # fmt: skip
"""The document's keys the summary's lines say; any other is printed as it came."""


def register(parser: argparse.ArgumentParser) -> None:
    """The command's options, on its `parser`."""
    add_connection_options(parser)
    add_fit_options(parser)
    parser.add_argument(
        "--json", action="store_true",
        help="print the whole metadata document, with client_checks, as JSON",
    )  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vla_client.client import ActionClient

    try:
        check_transport_installed(args.url, args.layout, args.endpoint)
        wait_for_server(args.url, args.wait_for_server)
        with ActionClient(args.url, **client_options(args)) as client:
            metadata = client.metadata()
            checks = client.checks(metadata)
    except VLAClientError as exc:
        return fail(failure_line(exc, args))
    document = {**metadata.model_dump(mode="json"), "client_checks": checks}
    if args.json:
        print_json(document)
    else:
        print("\n".join(summary(args.url, document)))
    return 0


def summary(url: str, document: Mapping[str, Any]) -> list[str]:
    """The lines of the readable summary of a metadata `document` (with ``client_checks``)."""
    taken, given = document.get("input") or {}, document.get("output") or {}
    checks = document.get("client_checks") or {}
    rows = [
        ("server", _server(url, document.get("server") or {})),
        ("model", _model(document)),
        ("cameras", _cameras(taken)),
        ("image size", _image_size(taken, checks)),
        ("state", _state(taken)),
        ("actions", _actions(given)),
        *_settings(taken, document),
        ("offers", _offers(document.get("capabilities") or {})),
        *_client(checks),
        *_unsummarised(document),
    ]
    width = max(len(name) for name, _ in rows)
    return [f"{name:<{width}}  {text}" for name, text in rows] + [
        "(--json prints the whole document)"
    ]


def _server(url: str, server: Mapping[str, Any]) -> str:
    named = " ".join(str(server[key]) for key in ("name", "version") if server.get(key))
    return f"{url}" + (f" ({named})" if named else "")


def _model(document: Mapping[str, Any]) -> str:
    model, family = document.get("model") or "unnamed", document.get("policy_family")
    return model + (f" (policy family {family})" if family and family != model else "")


def _state(taken: Mapping[str, Any]) -> str:
    return "any length" if taken.get("state_dim") is None else f"{taken['state_dim']} values"


def _settings(taken: Mapping[str, Any], document: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The rows of the settings the server reads requests with, where it has any."""
    rows = []
    if taken.get("openpi_layout"):
        rows.append(("openpi layout", str(taken["openpi_layout"])))
    if document.get("defaults"):
        rows.append(("defaults", _pairs(document["defaults"])))
    return rows


def _offers(capabilities: Mapping[str, Any]) -> str:
    offered = [name.replace("_", " ") for name, on in capabilities.items() if on is True]
    return ", ".join(offered) or "nothing beyond the action API"


def _client(checks: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The rows of what the client does before sending: its camera map, whether it checks."""
    rows = []
    if checks.get("camera_map"):
        rows.append(("camera map", _pairs(checks["camera_map"], "->")))
    rows.append(
        (
            "client",
            "checks each observation against this before sending"
            if checks.get("contract_checked")
            else "does not check observations (--no-check)",
        )
    )
    return rows


def _unsummarised(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A row for each key of the document no other row says, as it came."""
    return [
        (key, str(value))
        for key, value in document.items()
        if key not in SUMMARISED and key != "client_checks" and value
    ]


def _cameras(taken: Mapping[str, Any]) -> str:
    keys = taken.get("image_keys") or []
    text = ", ".join(keys) if keys else "any names"
    aliases = taken.get("camera_aliases") or {}
    return text + (f" (aliases: {_pairs(aliases, '->')})" if aliases else "")


def _image_size(taken: Mapping[str, Any], checks: Mapping[str, Any]) -> str:
    size = taken.get("image_size")
    if not size:
        return "any (frames are sent as they are)"
    required = ", required" if taken.get("image_size_required") else ""
    resize = checks.get("resize", "none")
    return f"{size[0]}x{size[1]} (height x width){required}; the client resizes: {resize}"


def _actions(given: Mapping[str, Any]) -> str:
    horizon, dim = given.get("action_horizon"), given.get("action_dim")
    text = f"{horizon} steps x {dim} values"
    padded = given.get("padded_action_dim")
    if padded and padded != dim:
        text += f" (padded to {padded})"
    return text + f", {given.get('dtype', 'float32')} {given.get('action_type', '')}".rstrip()


def _pairs(values: Mapping[str, Any], sep: str = "=") -> str:
    return ", ".join(f"{key}{sep}{value}" for key, value in values.items())

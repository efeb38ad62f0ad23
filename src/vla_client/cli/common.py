"""Options and helpers shared by the commands that talk to a server.

The options are added without importing the client (``--help`` stays fast: the choices come
from `vla_client.protocol.names`); the helpers import what they use when called.
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from vla_client.cli.checks import require_module
from vla_client.cli.parser import jpeg_quality, non_negative_float, seconds
from vla_client.cli.server_wait import DEFAULT_WAIT_S
from vla_client.errors import ServerError
from vla_client.protocol.endpoints import API_KEY_ENV, ENDPOINTS, Endpoint, websocket_url
from vla_client.protocol.names import ENCODINGS, LAYOUT_NAMES, RESIZES, WIRES, Encoding, Wire

if TYPE_CHECKING:
    from vla_client.client import ActionClient, ActionResult
    from vla_client.observation import Observation
    from vla_client.protocol import ActionMetadata, OpenpiLayout

DEFAULT_URL = "http://127.0.0.1:8000"
URL_SCHEMES = ("http", "https", "ws", "wss", "tcp", "ipc")


def add_connection_options(
    parser: argparse.ArgumentParser, *, url_default: str | None = DEFAULT_URL
) -> None:
    """URL, timeout and API key; a `url_default` of None means "start a local server"."""
    shown = url_default or "a local reference server on a free port"
    parser.add_argument(
        "url", nargs="?", type=server_url, default=url_default,
        help=f"server base URL (default: {shown})",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", type=seconds, default=30.0, metavar="SECONDS",
        help="how long to wait for a reply",
    )  # fmt: skip
    add_wait_option(parser)
    parser.add_argument(
        "--connect-timeout", type=seconds, default=None, metavar="SECONDS",
        help="GR00T's server (tcp://): how long to wait for its connection to open (a server "
        "still starting) before saying nothing answers there (default: 5)",
    )  # fmt: skip
    parser.add_argument(
        "--api-key", default=None,
        help=f"sent as 'Authorization: Bearer KEY', to GR00T's server as its api_token "
        f"(default: ${API_KEY_ENV}, else no key; prefer the variable, arguments show in ps)",
    )  # fmt: skip
    parser.add_argument(
        "--endpoint", choices=ENDPOINTS, default=None,
        help="the server's kind where the URL does not say: realtime or openpi (websockets), "
        "gr00t (NVIDIA Isaac GR00T's ZeroMQ server; a tcp:// URL implies it)",
    )  # fmt: skip


def add_wait_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--wait-for-server SECONDS``: how long the first contact waits for a server that is
    starting (`vla_client.cli.server_wait`)."""
    parser.add_argument(
        "--wait-for-server", type=non_negative_float, default=DEFAULT_WAIT_S, metavar="SECONDS",
        help="how long to wait for a server that is starting (its port refuses connections: "
        "'vla-client serve &' just run) before saying it is down; 0 does not wait (GR00T's "
        "server: --connect-timeout)",
    )  # fmt: skip


def add_encoding_options(parser: argparse.ArgumentParser) -> None:
    """Image encoding and wire format."""
    parser.add_argument(
        "--encoding", choices=ENCODINGS, default=None,
        help="how images travel in the request (default: png, or raw on openpi's endpoint)",
    )  # fmt: skip
    parser.add_argument(
        "--wire",
        choices=WIRES,
        default=None,
        help="body format (default: json over HTTP, msgpack over websockets)",
    )
    parser.add_argument(
        "--jpeg-quality", type=jpeg_quality, default=90, metavar="1-100",
        help="JPEG quality for --encoding jpeg",
    )  # fmt: skip


def add_fit_options(parser: argparse.ArgumentParser) -> None:
    """How observations are fitted to the server: camera names, frame size, openpi layout."""
    group = parser.add_argument_group("fitting the server")
    group.add_argument(
        "--camera-map", type=camera_pair, action="append", default=[], metavar="LOCAL=SERVER",
        help="send camera LOCAL under the server's name SERVER (repeatable)",
    )  # fmt: skip
    group.add_argument(
        "--resize", choices=RESIZES, default="auto",
        help="fit frames to the server's image size (or, where it announces none, the "
        "--layout's: 224x224 for droid, libero, aloha): pad (keep the aspect, black bars), crop "
        "(centre), none; auto pads only when the server refuses other sizes",
    )  # fmt: skip
    group.add_argument(
        "--no-check", dest="check_contract", action="store_false",
        help="send without checking the observation against the server's metadata",
    )  # fmt: skip
    add_state_split_option(group)
    group.add_argument(
        "--layout", choices=LAYOUT_NAMES, default=None,
        help="send openpi requests in this layout; implies openpi's websocket endpoint, "
        "on any URL (default there: flat)",
    )  # fmt: skip


def add_state_split_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--state-split``: how GR00T's server takes the state vector."""
    parser.add_argument(
        "--state-split", type=state_part, action="append", default=[], metavar="KEY=DIM",
        help="GR00T's server: the next DIM values of the state vector are its state KEY "
        "(repeatable, in the vector's order; `vla-client metadata` lists the keys under "
        "gr00t.state_keys)",
    )  # fmt: skip


def is_gr00t(args: argparse.Namespace) -> bool:
    """Whether the command's URL and options name GR00T's ZeroMQ server."""
    from vla_client.client.addressing import chosen_endpoint, transport_kind

    url = args.url or ""
    endpoint = chosen_endpoint(args.endpoint, getattr(args, "layout", None))
    return transport_kind(urlsplit(url).scheme, None, endpoint) == "zmq"


def dialect(args: argparse.Namespace) -> str | None:
    """The server family with a websocket dialect of its own that the command's URL or
    ``--endpoint`` names (``vllm_omni``, ``roboarena``), else None."""
    from vla_client.client.families import DIALECTS

    if args.endpoint in DIALECTS:
        return str(args.endpoint)
    url = args.url or ""
    if args.endpoint is None and urlsplit(url).scheme in ("http", "https", "ws", "wss"):
        named = websocket_url(url)[1]
        return named if named in DIALECTS else None
    return None


def server_url(text: str) -> str:
    """An argparse type: a server's base URL, with an http, https, ws or wss scheme and a port
    (or ``tcp://`` for GR00T's server, ``ipc://PATH`` for a Unix socket on this host)
    that can exist (``localhost:8000`` is refused with the URL it probably means, and one
    ending in a server route such as ``/v1/actions/generations`` with its base URL)."""
    from vla_client.client.addressing import route_in_url

    if "://" not in text:
        raise argparse.ArgumentTypeError(
            f"takes a URL with its scheme, such as http://{text}; got {text!r}"
        )
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in URL_SCHEMES:
        raise argparse.ArgumentTypeError(
            f"takes an {', '.join(URL_SCHEMES[:-1])} or {URL_SCHEMES[-1]} URL, got {text!r}"
        )
    if parts.scheme == "ipc":  # a server's Unix socket on this host: ipc://PATH
        from vla_client.protocol.ipc import ipc_path

        try:
            ipc_path(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text
    if not parts.hostname:
        raise argparse.ArgumentTypeError(f"names no host: {text!r}")
    try:
        port = parts.port
    except ValueError:  # not a number, or over 65535
        port = 0
    if port == 0:
        raise argparse.ArgumentTypeError(f"the port must be in 1..65535, got {text!r}")
    if reason := route_in_url(text):
        raise argparse.ArgumentTypeError(reason)
    return text


def state_part(text: str) -> tuple[str, int]:
    """An argparse type: ``KEY=DIM``, a state key and its length."""
    key, sep, dim = text.partition("=")
    if not sep or not key or not dim.isdigit() or int(dim) == 0:
        raise argparse.ArgumentTypeError(
            f"takes KEY=DIM with DIM a positive integer, as in arm=7; got {text!r}"
        )
    return key, int(dim)


def state_split(args: argparse.Namespace) -> dict[str, int] | None:
    """The ``--state-split`` pairs as one map in their order (None when none were given)."""
    pairs = getattr(args, "state_split", [])
    split = dict(pairs)
    if len(split) != len(pairs):
        raise argparse.ArgumentError(None, "--state-split names a state key twice")
    return split or None


def camera_pair(text: str) -> tuple[str, str]:
    """An argparse type: ``LOCAL=SERVER``."""
    local, sep, server = text.partition("=")
    if not sep or not local or not server:
        raise argparse.ArgumentTypeError(f"takes LOCAL=SERVER, got {text!r}")
    return local, server


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The `ActionClient` keyword arguments the connection, encoding and fit options give."""
    from vla_client.client.addressing import resolve_api_key

    try:
        api_key = resolve_api_key(args.api_key)
    except ValueError as exc:
        raise argparse.ArgumentError(None, str(exc)) from None
    options: dict[str, Any] = {"timeout_s": args.timeout, "api_key": api_key}
    names = ("encoding", "wire", "jpeg_quality", "resize", "check_contract", "layout", "endpoint")
    for name in names:
        value = getattr(args, name, None)
        if value is not None:
            options[name] = value
    pairs = getattr(args, "camera_map", [])
    if pairs:
        camera_map = dict(pairs)
        if len(camera_map) != len(pairs):
            raise argparse.ArgumentError(None, "--camera-map names a camera twice")
        options["camera_map"] = camera_map
    if split := state_split(args):
        options["state_split"] = split
    options.update(connect_option(args))
    return options


def warn_unmatched_camera_map(args: argparse.Namespace, cameras: Collection[str]) -> None:
    """Say on stderr which ``--camera-map`` entries name no camera the robot has (a typo, say):
    such an entry does nothing, and would otherwise do it silently."""
    for local, server in getattr(args, "camera_map", []):
        if local not in cameras:
            print(
                f"vla-client: warning: --camera-map {local}={server} does nothing: no camera is "
                f"named {local!r} (the cameras: {', '.join(cameras) or 'none'})",
                file=sys.stderr,
            )


def connect_option(args: argparse.Namespace) -> dict[str, float]:
    """``--connect-timeout`` as `ActionClient`'s keyword, for GR00T's server only (a usage
    error elsewhere: other servers refuse a connection at once)."""
    seconds = getattr(args, "connect_timeout", None)  # commands without the option: None
    if seconds is None:
        return {}
    if not is_gr00t(args):
        raise argparse.ArgumentError(None, "--connect-timeout is for GR00T's server (tcp:// URLs)")
    return {"connect_timeout_s": seconds}


def server_metadata(client: ActionClient) -> ActionMetadata | None:
    """What the server announces, or None for a server without metadata (404). A document the
    action API's model cannot read is the `ProtocolError` `ActionClient.metadata` raises
    (openpi's servers' own metadata reads, its keys kept as extras)."""
    try:
        return client.metadata()
    except ServerError as exc:
        if exc.status_code == 404:
            return None
        raise


def announced_layout(client: ActionClient) -> OpenpiLayout | None:
    """The built-in openpi layout `client` sends in, if any."""
    from vla_client.protocol import OpenpiLayout

    layout = client.options.layout
    return layout if isinstance(layout, OpenpiLayout) else None


def check_transport_installed(
    url: str | None, layout: str | None = None, endpoint: Endpoint | None = None
) -> None:
    """A websocket (a ``ws://`` URL, or the openpi endpoint a `layout` implies, as
    `ActionClient` decides) needs the websockets library, GR00T's ZeroMQ server pyzmq: say so
    before any work starts. A URL and ``--endpoint`` that name no server is a usage error."""
    from vla_client.client.addressing import chosen_endpoint, transport_kind

    if url is None:
        return
    try:
        kind = transport_kind(urlsplit(url).scheme, None, chosen_endpoint(endpoint, layout))
    except ValueError as exc:
        raise argparse.ArgumentError(None, str(exc)) from None
    if kind == "websocket":
        require_module("websockets", f"the websocket URL {url}")
    elif kind == "zmq":
        require_module("zmq", f"GR00T's server at {url}")


STAGES: tuple[tuple[str, Callable[[ActionResult], float | None]], ...] = (
    ("encode", lambda r: r.timings.encode_ms),
    ("round trip", lambda r: r.timings.round_trip_ms),
    ("server preprocess", lambda r: r.timings.server.get("preprocess_ms")),
    ("server inference", lambda r: r.timings.server.get("inference_ms")),
    ("server total", lambda r: r.timings.server.get("total_ms")),
    ("decode", lambda r: r.timings.decode_ms),
    ("total", lambda r: r.timings.total_ms),
)


def stage_samples(results: Sequence[ActionResult]) -> list[tuple[str, list[float]]]:
    """Each stage the results report, with its times in ms."""
    rows = []
    for name, read in STAGES:
        values = [v for v in (read(r) for r in results) if v is not None]
        if values:
            rows.append((name, values))
    return rows


def stage_percentiles(results: Sequence[ActionResult]) -> list[tuple[str, float, float, float]]:
    """(stage, p50, p90, p99) in ms for each stage the results report."""
    from vla_client.control.stats import percentiles

    rows = []
    for name, values in stage_samples(results):
        summary = percentiles(values)
        rows.append((name, summary.p50, summary.p90, summary.p99))
    return rows


def bytes_per_camera(
    observation: Observation, encoding: Encoding, wire: Wire, jpeg_quality: int
) -> dict[str, int]:
    """Bytes each camera's frame (a depth camera's too) takes in a request body with this
    encoding and wire."""
    from vla_client.protocol import dumps, encode_depth_value, encode_image_value

    sizes = {
        name: len(dumps(encode_image_value(frame, encoding, wire, jpeg_quality=jpeg_quality), wire))
        for name, frame in observation.images.items()
    }
    for name, frame in observation.depth.items():
        sizes[name] = len(dumps(encode_depth_value(frame, encoding, wire), wire))
    return sizes

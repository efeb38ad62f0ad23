"""Options and helpers shared by the commands that talk to a server."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from vla_client.cli.checks import require_module
from vla_client.cli.parser import jpeg_quality, seconds
from vla_client.client import ActionResult
from vla_client.control.stats import percentiles
from vla_client.observation import Observation
from vla_client.protocol import ENCODINGS, WIRES, Encoding, Wire, dumps, encode_image_value

DEFAULT_URL = "http://127.0.0.1:8000"


def add_connection_options(
    parser: argparse.ArgumentParser, *, url_default: str | None = DEFAULT_URL
) -> None:
    """URL, timeout and API key; a `url_default` of None means "start a local server"."""
    shown = url_default or "a local reference server on a free port"
    parser.add_argument(
        "url", nargs="?", default=url_default, help=f"server base URL (default: {shown})"
    )
    parser.add_argument(
        "--timeout", type=seconds, default=30.0, metavar="SECONDS",
        help="how long to wait for a reply",
    )  # fmt: skip
    parser.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY'")


def add_encoding_options(parser: argparse.ArgumentParser) -> None:
    """Image encoding and wire format."""
    parser.add_argument(
        "--encoding", choices=ENCODINGS, default="png", help="how images travel in the request"
    )
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


def check_transport_installed(url: str | None) -> None:
    """A ``ws://`` URL needs the websockets library: say so before any work starts."""
    if url is not None and url.startswith(("ws://", "wss://")):
        require_module("websockets", f"the websocket URL {url}")


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
    rows = []
    for name, values in stage_samples(results):
        summary = percentiles(values)
        rows.append((name, summary.p50, summary.p90, summary.p99))
    return rows


def bytes_per_camera(
    observation: Observation, encoding: Encoding, wire: Wire, jpeg_quality: int
) -> dict[str, int]:
    """Bytes each camera's frame takes in a request body with this encoding and wire."""
    return {
        name: len(dumps(encode_image_value(frame, encoding, wire, jpeg_quality=jpeg_quality), wire))
        for name, frame in observation.images.items()
    }

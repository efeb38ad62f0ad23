"""Options and helpers shared by the commands that talk to a server."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence

from vla_client.client import ActionResult
from vla_client.codecs import Encoding, Wire, encode_image_value
from vla_client.observation import Observation
from vla_client.protocol import dumps

DEFAULT_URL = "http://127.0.0.1:8000"


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """URL, timeout and API key."""
    parser.add_argument(
        "url", nargs="?", default=DEFAULT_URL, help=f"server base URL (default {DEFAULT_URL})"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for a reply")
    parser.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY'")


def add_encoding_options(parser: argparse.ArgumentParser) -> None:
    """Image encoding and wire format."""
    parser.add_argument("--encoding", choices=("png", "jpeg", "raw", "pixels"), default="png")
    parser.add_argument("--wire", choices=("json", "msgpack"), default="json")
    parser.add_argument("--jpeg-quality", type=int, default=90)


STAGES: tuple[tuple[str, Callable[[ActionResult], float | None]], ...] = (
    ("encode", lambda r: r.timings.encode_ms),
    ("round trip", lambda r: r.timings.round_trip_ms),
    ("server preprocess", lambda r: r.timings.server.get("preprocess_ms")),
    ("server inference", lambda r: r.timings.server.get("inference_ms")),
    ("server total", lambda r: r.timings.server.get("total_ms")),
    ("decode", lambda r: r.timings.decode_ms),
    ("total", lambda r: r.timings.total_ms),
)


def stage_percentiles(results: Sequence[ActionResult]) -> list[tuple[str, float, float, float]]:
    """(stage, p50, p90, p99) in ms for each stage the results report."""
    rows = []
    for name, read in STAGES:
        values = [v for v in (read(r) for r in results) if v is not None]
        if values:
            rows.append((name, *percentiles(values)))
    return rows


def percentiles(values: Sequence[float]) -> tuple[float, float, float]:
    """p50, p90 and p99 (inclusive method; a single value repeats)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[49], cuts[89], cuts[98]


def bytes_per_camera(
    observation: Observation, encoding: Encoding, wire: Wire, jpeg_quality: int
) -> dict[str, int]:
    """Bytes each camera's frame takes in a request body with this encoding and wire."""
    return {
        name: len(dumps(encode_image_value(frame, encoding, wire, jpeg_quality=jpeg_quality), wire))
        for name, frame in observation.images.items()
    }

"""Every client and every encoding against the code path before the fast paths, in one run.

    PYTHONPATH=src python benchmarks/bench_fast_paths.py [--repeats N] [--save FILE]

Three cameras of 360x640 (synthetic scenes). Each row times the path as it was ("before")
and as it is ("now") in alternation, so a noisy neighbour slows both alike, and prints the
median of each and their ratio, with the target:

- ``png/json end to end``: client encode, POST, server decode and inference, reply read. Before:
  the client of the revision given by ``--baseline`` (its PNG writer, called here directly: OpenCV
  with its parameters) against a reference server running that revision's code (exported with
  ``git archive``); now: this tree's client against this tree's server. Target 0.40.
- ``png size``: bytes of the PNG now against OpenCV's default-parameter PNG. Target 1.15.
- ``png/json server decode``: parse the body and decode every image. Before: orjson, base64 and
  ``cv2.imdecode`` one camera after another, on the old client's body; now: `decode_request`.
  Target 0.60.
- ``raw/json server decode``: before, orjson builds every value as a Python int and ``bytes()``
  packs them; now, `decode_request`. Target: 10 ms. A second row decodes a body that another
  client wrote with orjson (no fixed-width numbers).
- ``pixels/json client encode``, ``pixels/msgpack client encode`` and ``server decode``: before,
  ``frame.tolist()`` through orjson / msgspec, and msgpack's ints packed by `pixel_list_to_array`
  on the way back; now, this tree's `encode_request` / `decode_request`. Targets: 60 ms.
- ``websocket default client``: a `websockets` client at its defaults on ``/openpi/policy``
  against the same client with ``compression=None`` (target 1.20), and against a server that
  negotiates permessage-deflate, as the reference server did before.

The "before" paths are written out here, from the libraries they called, so that the product
keeps none of them. ``--save`` writes the figures as JSON for
``benchmarks/render_encoding_table.py``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import httpx
import msgpack
import numpy as np
import orjson
import pybase64
from ab_server import export
from bench_codecs import paired_median_ms
from bench_server import GENERATIONS, start, stop
from bench_websocket import websocket_round_trips

from vla_client.cameras.scene import synthetic_frames
from vla_client.codecs import (
    b64encode_text,
    encode_png,
    map_frames,
    packb,
    pixel_list_to_array,
)
from vla_client.codecs.png_write import png_writer
from vla_client.observation import Observation
from vla_client.protocol import encode_request, loads, read_actions
from vla_client.protocol.request import build_request
from vla_client.server.engine.memory import keep_freed_memory
from vla_client.server.wire.decode import decode_request

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "6718906"  # the last revision before the fast paths (issue 15)
BEFORE_PNG_PARAMS = [
    cv2.IMWRITE_PNG_COMPRESSION, 1,
    cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_HUFFMAN_ONLY,
    cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_SUB,
]  # fmt: skip


def before_png(frame: np.ndarray) -> bytes:
    """The PNG writer before: OpenCV with the parameters it used."""
    return bytes(cv2.imencode(".png", cv2.cvtColor(frame, cv2.COLOR_RGB2BGR), BEFORE_PNG_PARAMS)[1])


def document(observation: Observation, images: dict[str, Any]) -> dict[str, Any]:
    """The request document of `observation` with `images` as its image values."""
    payload = build_request(observation, encoding="raw", wire="msgpack").to_payload()
    payload["input"]["observation"]["images"] = images
    payload["input"]["observation"]["state"] = observation.state.tolist()  # type: ignore[union-attr]
    return payload


def before_png_body(observation: Observation) -> bytes:
    """The ``png``/``json`` body before: OpenCV's PNGs, in parallel threads as before."""
    pngs = map_frames(before_png, list(observation.images.values()))
    images = {
        name: {"b64_json": b64encode_text(data)}
        for name, data in zip(observation.images, pngs, strict=True)
    }
    return orjson.dumps(document(observation, images))


def before_bodies(observation: Observation) -> dict[str, bytes]:
    """The bodies the client wrote before, per path."""
    frames = observation.images
    raw = {
        name: {"values": f.ravel().tolist(), "dtype": "uint8", "shape": list(f.shape)}
        for name, f in frames.items()
    }
    pixels = {name: f.tolist() for name, f in frames.items()}
    return {
        "png/json": before_png_body(observation),
        "raw/json": orjson.dumps(document(observation, raw)),
        "pixels/json": orjson.dumps(document(observation, pixels)),
        "pixels/msgpack": packb(document(observation, pixels)),
    }


def before_encode(observation: Observation, wire: str) -> bytes:
    """The ``pixels`` client encode before: ``frame.tolist()`` through the wire's serialiser."""
    pixels = {name: f.tolist() for name, f in observation.images.items()}
    if wire == "json":
        return orjson.dumps(document(observation, pixels))
    return packb(document(observation, pixels))


def before_decode(body: bytes, path: str) -> dict[str, np.ndarray]:
    """The server decode before, for `path`'s body."""
    if path == "pixels/msgpack":
        images = msgpack.unpackb(body, raw=False)["input"]["observation"]["images"]
        return {name: pixel_list_to_array(value) for name, value in images.items()}
    images = orjson.loads(body)["input"]["observation"]["images"]
    if path == "raw/json":
        return {
            name: np.frombuffer(bytes(value["values"]), np.uint8).reshape(value["shape"])
            for name, value in images.items()
        }
    return {
        name: cv2.imdecode(
            np.frombuffer(pybase64.b64decode(value["b64_json"], validate=True), np.uint8),
            cv2.IMREAD_COLOR_RGB,
        )
        for name, value in images.items()
    }


def end_to_end(baseline: str, observation: Observation, repeats: int) -> tuple[float, float]:
    """Medians (ms) of png/json requests: the baseline's client and server, then this tree's."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = export(baseline, Path(tmp))
        processes = []
        try:
            urls = {}
            for name, root in (("before", tree), ("now", ROOT)):
                script = str(root / "benchmarks" / "bench_server.py")
                process, urls[name] = start([sys.executable, script, "--serve"], str(root / "src"))
                processes.append(process)
            with httpx.Client(timeout=60) as client:

                def send(url: str, encode: Callable[[], bytes]) -> None:
                    reply = client.post(
                        url + GENERATIONS,
                        content=encode(),
                        headers={"content-type": "application/json"},
                    )
                    reply.raise_for_status()
                    read_actions(loads(reply.content, "json"))

                return paired_median_ms(
                    lambda: send(urls["before"], lambda: before_png_body(observation)),
                    lambda: send(urls["now"], lambda: encode_request(observation)[0]),
                    repeats,
                )
        finally:
            stop(processes)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=30, help="timed runs of each path")
    parser.add_argument("--baseline", default=BASELINE, help="revision of the 'before' server")
    parser.add_argument("--save", help="write the figures to this JSON file")
    args = parser.parse_args()
    keep_freed_memory()  # what the server's process does: decodes are timed as it would run them
    load_before = os.getloadavg()
    frames = synthetic_frames(3, 360, 640)
    observation = Observation(frames, state=np.linspace(-1, 1, 7), task="bench")
    before = before_bodies(observation)
    now = {
        path: encode_request(observation, encoding=path.split("/")[0], wire=path.split("/")[1])[0]  # type: ignore[arg-type]
        for path in before
    }
    foreign_raw = before["raw/json"]  # what another client writes: orjson's shortest numbers
    for path, body in now.items():
        content_type = "application/msgpack" if path.endswith("msgpack") else "application/json"
        decoded = decode_request(body, content_type).images
        old = before_decode(before[path], path) if path != "pixels/json" else decoded
        for name, frame in frames.items():
            assert np.array_equal(decoded[name], frame) and np.array_equal(old[name], frame), path

    rows: list[dict[str, Any]] = []

    def row(name: str, pair: tuple[float, float], target: str, unit: str = "ms") -> None:
        rows.append({"name": name, "before": pair[0], "now": pair[1],
                     "ratio": pair[1] / pair[0], "target": target, "unit": unit})  # fmt: skip

    n = args.repeats
    row("png/json end to end", end_to_end(args.baseline, observation, max(n, 20)), "ratio <= 0.40")
    pngs_now = map_frames(encode_png, list(frames.values()))
    default_png = [bytes(cv2.imencode(".png", f)[1]) for f in frames.values()]
    sizes = (sum(map(len, default_png)), sum(map(len, pngs_now)))
    row("png size (against OpenCV default)", sizes, "ratio <= 1.15", "bytes")
    row(
        "png client encode",
        paired_median_ms(
            lambda: map_frames(before_png, list(frames.values())),
            lambda: encode_request(observation),
            n,
        ),
        "-",
    )
    decodes = [  # (row, the body before, the body now, target)
        ("png/json server decode", before["png/json"], now["png/json"], "ratio <= 0.60"),
        ("raw/json server decode", before["raw/json"], now["raw/json"], "now <= 10 ms"),
        ("raw/json server decode, another client's body", foreign_raw, foreign_raw, "-"),
    ]
    for name, old_body, new_body, target in decodes:
        path = name.split()[0]
        pair = paired_median_ms(
            lambda b=old_body, p=path: before_decode(b, p),
            lambda b=new_body: decode_request(b, "application/json"),
            n,
        )
        row(name, pair, target)
    for wire in ("json", "msgpack"):
        row(
            f"pixels/{wire} client encode",
            paired_median_ms(
                lambda w=wire: before_encode(observation, w),
                lambda w=wire: encode_request(observation, encoding="pixels", wire=w),  # type: ignore[arg-type]
                max(n // 3, 5),
            ),
            "now <= 60 ms",
        )
    row(
        "pixels/msgpack server decode",
        paired_median_ms(
            lambda: before_decode(before["pixels/msgpack"], "pixels/msgpack"),
            lambda: decode_request(now["pixels/msgpack"], "application/msgpack"),
            max(n // 3, 5),
        ),
        "now <= 60 ms",
    )
    for path in ("png/json", "raw/json", "pixels/json", "pixels/msgpack"):
        row(f"{path} body size", (len(before[path]), len(now[path])), "-", "bytes")
    sockets = websocket_round_trips(n)
    row("websocket default client, against compression=None",
        (sockets["compression=None"], sockets["default"]), "ratio <= 1.20")  # fmt: skip
    row("websocket default client, against a deflating server",
        (sockets["default, deflate server"], sockets["default"]), "-")  # fmt: skip

    report = {
        "format": "vla-client.fast-paths",
        "date": datetime.date.today().isoformat(),
        "baseline": args.baseline,
        "png_writer": png_writer(),
        "load": [list(load_before), list(os.getloadavg())],
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "repeats": n,
        "rows": rows,
    }
    print(f"3 cameras 360x640, {report['date']}, PNG writer {report['png_writer']}, "
          f"load {load_before[0]:.2f} -> {report['load'][1][0]:.2f}, medians of {n}")  # fmt: skip
    print(f"{'path':<52}{'before':>10}{'now':>10}{'ratio':>7}  target")
    for r in rows:
        scale = 1e6 if r["unit"] == "bytes" else 1.0
        unit = " MB" if r["unit"] == "bytes" else ""
        print(f"{r['name']:<52}{r['before'] / scale:10.2f}{r['now'] / scale:10.2f}"
              f"{r['ratio']:7.2f}  {r['target']}{unit}")  # fmt: skip
    if args.save:
        Path(args.save).write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()

"""``vla-client demo``: the whole path on one machine, with nothing to configure.

Starts the reference server on a free loopback port (and a Unix socket in a private temporary
folder, for ``ipc://``), sends synthetic 3-camera frames with every encoding and wire format (and
the msgpack ones over a websocket too, and raw frames in shared memory), checks lossless delivery
where the encoding promises it, prints what each path costs (fastest first), and stops the
server.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
from typing import TYPE_CHECKING, Literal

from vla_client.cli.output import print_table
from vla_client.protocol.names import Encoding, Wire

if TYPE_CHECKING:  # imported where used: the options are added without them
    from vla_client.client import ActionResult

PATHS: tuple[tuple[Encoding, Wire, Literal["http", "websocket", "ipc"]], ...] = (
    ("raw", "msgpack", "http"), ("jpeg", "msgpack", "http"), ("jpeg", "json", "http"),
    ("png", "msgpack", "http"), ("png", "json", "http"), ("raw", "json", "http"),
    ("pixels", "msgpack", "http"), ("pixels", "json", "http"),
    ("raw", "msgpack", "websocket"), ("png", "msgpack", "websocket"), ("raw", "msgpack", "ipc"),
)  # fmt: skip


def register(parser: argparse.ArgumentParser) -> None:
    """The command's options, on its `parser`."""
    parser.add_argument("--repeat", type=int, default=3, help="requests per encoding")
    parser.add_argument("--cameras", type=int, default=3)
    parser.set_defaults(func=run)


TOTAL_COLUMN = 5  # of the table's rows: the median end-to-end ms


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from vla_client.cameras.scene import synthetic_frames
    from vla_client.client import ActionClient, mismatched_cameras
    from vla_client.codecs.png_write import png_writer
    from vla_client.observation import Observation
    from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app

    rows = []
    failures = 0
    with contextlib.ExitStack() as stack:
        socket_path = os.path.join(stack.enter_context(tempfile.TemporaryDirectory()), "demo.sock")
        config = ServerConfig(port=0, ipc_path=socket_path)
        server = stack.enter_context(LocalServer(create_app(ReferencePolicy(), config)))
        print(f"reference server on {server.url} and ipc://{socket_path}; {args.cameras} "
              f"synthetic cameras 360x640; PNG written by {png_writer()}\n")  # fmt: skip
        for encoding, wire, transport in PATHS:
            if transport == "ipc":  # raw frames in shared memory: its options are fixed
                client = ActionClient(f"ipc://{socket_path}", timeout_s=60)
            else:
                client = ActionClient(
                    server.url, encoding=encoding, wire=wire, transport=transport, timeout_s=60
                )
            with client:
                results, lossless = [], True
                for t in range(args.repeat):
                    observation = Observation(
                        synthetic_frames(args.cameras, t=t), state=np.zeros(7), task="demo"
                    )
                    result = client.infer(observation, return_digest=True)
                    lossless &= not mismatched_cameras(observation, result)
                    results.append(result)
            failures += encoding != "jpeg" and not lossless
            rows.append(_row((encoding, wire, transport), results, lossless=lossless))
    rows.sort(key=lambda row: row[TOTAL_COLUMN])  # fastest first, as bench ranks its paths
    print_table(
        (
            "path",
            "via",
            "MB sent",
            "encode ms",
            "server decode ms",
            "total ms",
            "actions",
            "bit-exact",
        ),
        rows,
    )
    print("\nmedians over", args.repeat, "requests; total = client encode + round trip + decode")
    return 1 if failures else 0


def _row(
    path: tuple[Encoding, Wire, str], results: list[ActionResult], *, lossless: bool
) -> tuple[str, str, str, float, float, float, str, str]:
    """A path's row of the table: what it sent, its median times, the actions' shape and
    whether every frame arrived bit-exact (JPEG is lossy by design)."""
    encoding, wire, transport = path
    return (
        f"{encoding}/{wire}",
        "ws" if transport == "websocket" else transport,
        f"{results[-1].timings.bytes_sent / 1e6:.2f}",
        statistics.median(r.timings.encode_ms for r in results),
        statistics.median(r.timings.server.get("preprocess_ms", 0.0) for r in results),
        statistics.median(r.timings.total_ms for r in results),
        "x".join(map(str, results[-1].actions.shape)),
        ("yes" if lossless else "NO") if encoding != "jpeg" else "lossy",
    )

"""Round trip on ``/openpi/policy`` for a `websockets` client at its defaults, in one run.

    PYTHONPATH=src python benchmarks/bench_websocket.py [--repeats N]

`websockets` offers permessage-deflate unless told ``compression=None``. Three clients send the
same openpi request (3 cameras 360x640 raw, msgpack) in alternation:

- ``default``: ``websockets.sync.client.connect(url)`` as shipped, against the reference server;
- ``compression=None``: the same client with deflate turned off, against the same server;
- ``default, deflate server``: the default client against a server started with uvicorn's own
  default, ``ws_per_message_deflate=True`` (what the reference server did before: the baseline).

Target: ``default`` within 1.2x of ``compression=None``.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import uvicorn
from websockets.sync.client import ClientConnection, connect

from vla_client.cameras.scene import synthetic_frames
from vla_client.codecs import msgpack_numpy
from vla_client.observation import Observation
from vla_client.protocol.request import build_openpi_request
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.config import uvicorn_options


@contextlib.contextmanager
def deflating_server() -> Iterator[int]:
    """The reference app under uvicorn's default websocket settings (permessage-deflate on)."""
    config = ServerConfig(port=0)
    options = {**uvicorn_options(config), "ws_per_message_deflate": True}
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(ReferencePolicy(), config), host="127.0.0.1", port=0,
            log_level="warning", access_log=False, **options,
        )
    )  # fmt: skip
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        while httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code != 200:
            time.sleep(0.05)  # started, but the policy still loading: it would answer so
        yield port
    finally:
        server.should_exit = True
        thread.join(15)


def round_trip_ms(ws: ClientConnection, body: bytes) -> float:
    start = time.perf_counter()
    ws.send(body)
    msgpack_numpy.unpackb(ws.recv(timeout=30))
    return (time.perf_counter() - start) * 1000


def websocket_round_trips(repeats: int) -> dict[str, float]:
    """Median round trip (ms) of each client, sent in alternation; see the module docstring."""
    observation = Observation(synthetic_frames(3, 360, 640), task="pick")
    body = msgpack_numpy.packb(build_openpi_request(observation))
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(LocalServer(create_app(ReferencePolicy())))
        baseline_port = stack.enter_context(deflating_server())
        urls: dict[str, tuple[int, dict[str, Any]]] = {
            "default": (server.port, {}),
            "compression=None": (server.port, {"compression": None}),
            "default, deflate server": (baseline_port, {}),
        }
        clients = {
            name: stack.enter_context(connect(f"ws://127.0.0.1:{port}/openpi/policy", **kwargs))
            for name, (port, kwargs) in urls.items()
        }
        samples: dict[str, list[float]] = {name: [] for name in clients}
        for ws in clients.values():
            ws.recv(timeout=10)  # metadata
            round_trip_ms(ws, body)  # warm-up
        for i in range(repeats):
            order = list(clients.items())
            for name, ws in order[i % 3 :] + order[: i % 3]:
                samples[name].append(round_trip_ms(ws, body))
        if clients["default"].protocol.extensions:
            raise RuntimeError("the reference server negotiated permessage-deflate")
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    medians = websocket_round_trips(args.repeats)
    reference = medians["compression=None"]
    print(f"/openpi/policy, 3 cameras 360x640 raw msgpack, median of {args.repeats} (ms)")
    for name, median in medians.items():
        print(f"{name:<26}{median:8.2f}  x{median / reference:5.2f}")
    print("target: default <= 1.20x compression=None")


if __name__ == "__main__":
    main()

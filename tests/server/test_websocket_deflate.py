"""Websocket clients at their library's defaults get no permessage-deflate from the server.

`websockets` offers permessage-deflate unless told ``compression=None``; SGLang's own benchmark
client connects that way. The server must decline, on every route and however it was started,
or each such client pays for deflating megabytes of pixels both ways.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from websockets.asyncio.client import connect as async_connect
from websockets.sync.client import connect

from vla_client.cameras.scene import synthetic_frames
from vla_client.codecs import msgpack_numpy
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import load_test

ROUTES = ("/openpi/policy", "/v1/actions/realtime")
FRAMES = synthetic_frames(2, 48, 64, seed=3)


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    app = create_app(ReferencePolicy(action_horizon=4, action_dim=3), ServerConfig(in_process=True))
    with LocalServer(app) as running:
        yield running


def request(route: str) -> bytes:
    if route == "/openpi/policy":
        flat = {f"observation.images.{name}": frame for name, frame in FRAMES.items()}
        return msgpack_numpy.packb({**flat, "prompt": "pick"})
    images = dict(FRAMES)
    return msgpack_numpy.packb({"input": {"task": "pick", "observation": {"images": images}}})


def actions_of(reply: dict[str, object]) -> object:
    if "actions" in reply:
        return reply["actions"]
    return reply["data"][0]["action"]["values"]  # type: ignore[index]


def test_offer_of_deflate_is_what_the_library_sends_by_default(server: LocalServer) -> None:
    with connect(f"ws://127.0.0.1:{server.port}/openpi/policy") as ws:
        offered = ws.request.headers.get("Sec-WebSocket-Extensions") if ws.request else None
    assert offered is not None and "permessage-deflate" in offered


@pytest.mark.parametrize("route", ROUTES)
def test_sync_client_at_defaults_gets_no_extensions(server: LocalServer, route: str) -> None:
    with connect(f"ws://127.0.0.1:{server.port}{route}") as ws:
        assert ws.protocol.extensions == []
        assert ws.response is not None
        assert ws.response.headers.get("Sec-WebSocket-Extensions") is None
        ws.recv(timeout=5)  # metadata
        ws.send(request(route))
        reply = msgpack_numpy.unpackb(ws.recv(timeout=10))
    assert isinstance(actions_of(reply), np.ndarray)


@pytest.mark.parametrize("route", ROUTES)
def test_asyncio_client_at_defaults_gets_no_extensions(server: LocalServer, route: str) -> None:
    async def exchange() -> tuple[list[object], object]:
        async with async_connect(f"ws://127.0.0.1:{server.port}{route}") as ws:
            await ws.recv()
            await ws.send(request(route))
            reply = msgpack_numpy.unpackb(await asyncio.wait_for(ws.recv(), 10))
            return list(ws.protocol.extensions), reply

    extensions, reply = asyncio.run(exchange())
    assert extensions == []
    assert isinstance(actions_of(reply), np.ndarray)  # type: ignore[arg-type]


@pytest.mark.parametrize("args", [(), ("--api-servers", "2")], ids=["serve", "api-servers"])
def test_served_from_the_command_line_no_extensions(args: tuple[str, ...]) -> None:
    served = load_test.ServerProcess(*args).start()
    try:
        for route in ROUTES:
            with connect(f"ws://127.0.0.1:{served.port}{route}") as ws:
                assert ws.protocol.extensions == []
    finally:
        served.stop()

"""A base URL with a path (a policy server behind a proxy, under ``/robot``) is where requests go.

The HTTP transports join their endpoints' paths to the base URL once, when they are made, as
httpx joins a path to its client's base URL on every request: the base URL's path, then the
endpoint's. Checked against a real server that records every path it is asked for and answers
only under its prefix, with the base URL given with and without its trailing slash, from both
clients.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vla_client.client import ActionClient, AsyncActionClient
from vla_client.codecs import msgpack_numpy
from vla_client.observation import Observation
from vla_client.protocol import GENERATIONS_PATH, METADATA_PATH
from vla_client.server import LocalServer
from vla_client.server.wire.decode import decode_request

PREFIX = "/robot"
ACTIONS = np.arange(6, dtype=np.float32).reshape(3, 2)


class PrefixedServer:
    """The action API under `PREFIX` only; `paths` lists what was asked for, in order."""

    def __init__(self) -> None:
        self.paths: list[str] = []

        async def anything(request: Request) -> Response:
            path = request.url.path
            self.paths.append(path)
            if path == PREFIX + METADATA_PATH:
                return JSONResponse({"object": "action.metadata", "input": {"image_keys": []}})
            if path == PREFIX + GENERATIONS_PATH:
                decoded = decode_request(await request.body(), request.headers["content-type"])
                reply = {"request_id": decoded.request_id, "actions": ACTIONS}
                return Response(msgpack_numpy.packb(reply), media_type=msgpack_numpy.CONTENT_TYPE)
            return JSONResponse({"detail": f"nothing at {path}"}, status_code=404)

        route = Route("/{path:path}", anything, methods=["GET", "POST"])
        self.app = Starlette(routes=[route])


@pytest.fixture
def prefixed() -> Iterator[tuple[PrefixedServer, LocalServer]]:
    server = PrefixedServer()
    with LocalServer(server.app) as local:  # type: ignore[arg-type]
        yield server, local


@pytest.mark.parametrize("slash", ["", "/"], ids=["no slash", "trailing slash"])
def test_requests_go_under_the_base_urls_path(
    prefixed: tuple[PrefixedServer, LocalServer], small_observation: Observation, slash: str
) -> None:
    server, local = prefixed
    base_url = local.url + PREFIX + slash
    with ActionClient(base_url, encoding="raw", wire="msgpack") as client:
        result = client.infer(small_observation)
    np.testing.assert_array_equal(result.actions, ACTIONS)

    async def infer_async() -> np.ndarray:
        async with AsyncActionClient(base_url, encoding="raw", wire="msgpack") as client:
            return (await client.infer(small_observation)).actions

    np.testing.assert_array_equal(asyncio.run(infer_async()), ACTIONS)
    asked = [PREFIX + METADATA_PATH, PREFIX + GENERATIONS_PATH]
    assert server.paths == asked + asked

"""The client's path is straight: from `infer` down to the socket, nothing calls back into the
client, and an observation crosses the client's driver, its server family's session, the
book, the fit, the retries and the transport, and no other file of client/ or transports/.

Traced with tools/client_path.py against the reference server on 127.0.0.1. Before the
sessions of steps, `RequestBook.run` called back into each client for the metadata, the
exchange and the next reply, and the retries called the client's attempts.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import client_path as tool  # noqa: E402

from vla_client import ActionClient, AsyncActionClient, Observation  # noqa: E402

SHARED = ["client/request_book.py", "client/fit.py", "transports/drive.py", "transports/retry.py",
          "client/action_api.py"]  # fmt: skip
SERVER_SIDE = ("server/wire/reply_build.py", "server/wire/decode.py", "codecs/png_read.py",
               "codecs/image_decode.py")  # fmt: skip
"""The server's halves of the shared layers: the client crosses none of them (it took its
request ids from the reply builders until 0.3.0)."""


@pytest.mark.parametrize("scheme", ["http", "ws"])
def test_the_blocking_client_goes_straight_down(
    server_url: str, observation: Observation, scheme: str
) -> None:
    url = server_url.replace("http", scheme, 1)
    with ActionClient(url) as client:
        traces = [tool.trace_call(lambda: client.infer(observation)) for _ in range(2)]
    transport = "transports/http.py" if scheme == "http" else "transports/websocket.py"
    for trace in traces:
        assert trace.callbacks == set()
        assert not set(SERVER_SIDE) & set(trace.files)
    assert sorted(traces[0].under("client/", "transports/")) == sorted(
        ["client/sync_client.py", transport, *SHARED]
    )


@pytest.mark.parametrize("scheme", ["http", "ws"])
def test_the_asyncio_client_goes_straight_down(
    server_url: str, observation: Observation, scheme: str
) -> None:
    url = server_url.replace("http", scheme, 1)

    async def both() -> list[tool.Trace]:
        async with AsyncActionClient(url) as client:
            return [await tool.trace_async(lambda: client.infer(observation)) for _ in range(2)]

    traces = asyncio.run(both())
    transport = "transports/http.py" if scheme == "http" else "transports/websocket.py"
    for trace in traces:
        assert trace.callbacks == set()
        assert not set(SERVER_SIDE) & set(trace.files)
    assert sorted(traces[0].under("client/", "transports/")) == sorted(
        ["client/async_client.py", transport, *SHARED]
    )

"""The client against servers that redirect, drip their reply or never end it (issue 22)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import numpy as np
import pytest

from raw_http_server import RawHTTPServer, RawRequest
from vla_client.client import ActionClient
from vla_client.errors import ServerError
from vla_client.observation import Observation
from vla_client.transports import NO_RETRY


@pytest.fixture
def observation() -> Observation:
    return Observation({"wrist": np.zeros((32, 32, 3), np.uint8)}, task="t")


@pytest.fixture
def elsewhere() -> Iterator[RawHTTPServer]:
    """Where a hostile server points its redirects; it records whatever reaches it."""

    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

    with RawHTTPServer(answer) as server:
        yield server


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_reported_as_one_and_not_followed(
    status: int, elsewhere: RawHTTPServer, observation: Observation
) -> None:
    location = f"{elsewhere.url}/v1/actions/generations"

    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(
            f"HTTP/1.1 {status} Moved\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n".encode()
        )

    with (
        RawHTTPServer(answer) as server,
        ActionClient(server.url, api_key="s3cret", retry=NO_RETRY, check_contract=False) as client,
        pytest.raises(ServerError) as caught,
    ):
        client.infer(observation, request_id="r-1")
    assert caught.value.status_code == status
    assert f"the server redirected to {location} (HTTP {status}); not followed, " in str(
        caught.value
    )
    assert "the API key was not sent there" in str(caught.value)
    assert caught.value.request_id == "r-1"
    assert server.requests[0].headers["authorization"] == "Bearer s3cret"
    assert elsewhere.requests == []


def test_a_redirect_of_the_metadata_is_reported_the_same_way(observation: Observation) -> None:
    def answer(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 307 Temporary Redirect\r\nContent-Length: 0\r\n\r\n")

    with (
        RawHTTPServer(answer) as server,
        ActionClient(server.url, retry=NO_RETRY) as client,
        pytest.raises(ServerError, match="redirected without saying where"),
    ):
        client.infer(observation)

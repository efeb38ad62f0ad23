"""SGLang's action server as it answers once its scheduler failed: 503 ``{"error": message}``
(not FastAPI's ``detail``). The client shows the server's message, on both clients, over a real
HTTP connection. (While it warms up, SGLang holds requests instead: see test_warm_up.py in
tests/transports.)"""

from __future__ import annotations

import asyncio
import socket

import numpy as np
import pytest

from raw_http_server import RawHTTPServer, RawRequest
from vla_client import ActionClient, AsyncActionClient, Observation
from vla_client.errors import ServerError
from vla_client.transports import NO_RETRY


def answer_503(body: bytes) -> object:
    def answer(request: RawRequest, connection: socket.socket) -> None:
        head = (
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        connection.sendall(head.encode() + body)

    return answer


OBSERVATION = Observation({"cam": np.zeros((8, 8, 3), np.uint8)})


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize(
    "body",
    [
        b'{"error": "Server is warming up, please retry"}',
        b'{"error": {"message": "Server is warming up, please retry", "code": 503}}',
    ],
    ids=["sglang", "openai-form"],
)
def test_sglangs_503_error_body_shows_its_message(kind: str, body: bytes) -> None:
    with RawHTTPServer(answer_503(body)) as server:  # type: ignore[arg-type]
        options = {"check_contract": False, "retry": NO_RETRY}
        with pytest.raises(ServerError) as raised:
            if kind == "sync":
                with ActionClient(server.url, **options) as client:  # type: ignore[arg-type]
                    client.infer(OBSERVATION)
            else:

                async def main() -> None:
                    async with AsyncActionClient(server.url, **options) as client:  # type: ignore[arg-type]
                        await client.infer(OBSERVATION)

                asyncio.run(main())
    assert raised.value.status_code == 503
    assert raised.value.detail == "Server is warming up, please retry"

"""A request id that is not a string: the client refuses to build the request, typed and
naming the field (it was pydantic's `ValidationError`); the server answers 400 naming the field
on every route and goes on serving."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from served import serve
from websockets.sync.client import connect

from vla_client import ActionClient
from vla_client.cameras.scene import synthetic_frames
from vla_client.errors import CodecError
from vla_client.observation import Observation
from vla_client.protocol import GENERATIONS_PATH, dumps, encode_request, loads
from vla_client.server import LocalServer, ReferencePolicy

NOT_STRINGS = [5, 1.5, ["a"], {"id": 1}, True, b"raw"]


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    running = serve(ReferencePolicy(), "worker")
    yield running
    running.stop()


def observation() -> Observation:
    return Observation(images=synthetic_frames(1, 16, 16))


@pytest.mark.parametrize("request_id", NOT_STRINGS, ids=lambda value: type(value).__name__)
@pytest.mark.parametrize("wire", ["json", "msgpack"])
def test_the_client_refuses_to_build_a_request_with_an_id_that_is_not_a_string(
    request_id: object, wire: str
) -> None:
    with pytest.raises(CodecError, match=r"^request_id: must be a string or None; got ") as error:
        encode_request(observation(), wire=wire, request_id=request_id)  # type: ignore[arg-type]
    assert error.value.field == "request_id"


def test_action_client_infer_raises_the_typed_error_then_serves_a_good_id(
    server: LocalServer,
) -> None:
    with ActionClient(server.url) as client:
        with pytest.raises(CodecError, match="request_id"):
            client.infer(observation(), request_id=5)  # type: ignore[arg-type]
        assert client.infer(observation(), request_id="fine").request_id == "fine"


@pytest.mark.parametrize("request_id", [1.5, ["a"], {"id": 1}, True])
def test_the_server_answers_400_naming_the_field_on_http_and_websocket(
    server: LocalServer, request_id: object
) -> None:
    body, content_type = encode_request(observation(), wire="json")
    document = dict(json.loads(body), request_id=request_id)
    reply = httpx.post(
        server.url + GENERATIONS_PATH,
        content=json.dumps(document),
        headers={"content-type": content_type},
    )
    assert reply.status_code == 400
    assert reply.json()["detail"].startswith("request_id: ")
    packed, _ = encode_request(observation(), wire="msgpack", encoding="raw")
    with connect(server.url.replace("http", "ws", 1) + "/v1/actions/realtime") as ws:
        ws.recv()  # the metadata
        ws.send(dumps(dict(loads(packed, "msgpack"), request_id=request_id), "msgpack"))
        refusal = loads(ws.recv(), "msgpack")
        assert refusal["status"] == 400 and refusal["error"].startswith("request_id: ")
    fine = httpx.post(
        server.url + GENERATIONS_PATH, content=body, headers={"content-type": content_type}
    )
    assert fine.status_code == 200

"""Each bad input gets its status and a JSON detail naming the problem; the server keeps serving."""

import json

import httpx
import msgpack
import pytest

from vla_client import ActionClient
from vla_client.codecs import b64encode_text, encode_png


def post(url: str, body: bytes, content_type: str = "application/json") -> httpx.Response:
    return httpx.post(
        f"{url}/v1/actions/generations", content=body, headers={"content-type": content_type}
    )


def request_with(image_value, **observation) -> bytes:
    return json.dumps(
        {"input": {"task": "t", "observation": {"images": {"wrist": image_value}, **observation}}}
    ).encode()


TRUNCATED_PNG = b64encode_text(encode_png(__import__("numpy").full((32, 32, 3), 9, "uint8"))[:60])

CASES = [
    (b'{"input": {', "application/json", 400, "malformed JSON"),
    (b"\x92\xc1", "application/msgpack", 400, "malformed msgpack"),
    (
        request_with({"b64_json": "%%%not-base64%%%"}),
        "application/json",
        400,
        "images.wrist: invalid base64",
    ),
    (
        request_with({"b64_json": TRUNCATED_PNG}),
        "application/json",
        400,
        "images.wrist: truncated PNG",
    ),
    (
        request_with([[[1, 2, 3], [4, 5]]]),
        "application/json",
        400,
        "images.wrist: pixel list is ragged",
    ),
    (request_with([[["r", "g", "b"]]]), "application/json", 400, "non-numeric"),
    (request_with([[[300, 0, 0]]]), "application/json", 400, "0..255"),
    (
        request_with({"values": [1, 2, 3], "dtype": "complex128"}),
        "application/json",
        400,
        "not numeric",
    ),
    (
        request_with({"values": [1, 2, 3], "dtype": "float32", "shape": [2, 2, 3]}),
        "application/json",
        400,
        "reshape",
    ),
    (
        request_with(
            {"values": [0.5] * 12, "dtype": "float32", "shape": [2, 2, 3]}, state=[1, None]
        ),
        "application/json",
        400,
        "state",
    ),
    (
        json.dumps({"input": {"observation": {"images": {}}}}).encode(),
        "application/json",
        400,
        "no camera images",
    ),
    (
        json.dumps(
            {
                "input": {"observation": {"images": {"w": [[[1, 2, 3]]]}}},
                "runtime": {"response_format": "xml"},
            }
        ).encode(),
        "application/json",
        400,
        "response_format",
    ),
    (
        request_with(
            {"values": [0] * (1100 * 1000 * 3), "dtype": "uint8", "shape": [1100, 1000, 3]}
        ),
        "application/json",
        413,
        "over the limit",
    ),
    (
        json.dumps(
            {"input": {"observation": {"images": {f"c{i}": [[[1, 2, 3]]] for i in range(5)}}}}
        ).encode(),
        "application/json",
        413,
        "cameras",
    ),
    (b"x" * (17 * 1024 * 1024), "application/json", 413, "over the limit"),
    (b"\x89PNG", "image/png", 415, "unsupported content type"),
    (
        msgpack.packb(
            {
                "input": {
                    "observation": {
                        "images": {
                            "w": {
                                "__ndarray__": True,
                                "data": b"\0" * 4,
                                "dtype": "|O",
                                "shape": [4],
                            }
                        }
                    }
                }
            }
        ),
        "application/msgpack",
        400,
        "Unsupported dtype",
    ),
]


@pytest.mark.parametrize(
    ("body", "content_type", "status", "detail"), CASES, ids=[c[3] for c in CASES]
)
def test_bad_input_gets_status_and_detail_then_service_continues(
    server_url, observation, body, content_type, status, detail
):
    reply = post(server_url, body, content_type)
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    assert detail in reply.json()["detail"]
    with ActionClient(server_url, encoding="png") as client:
        assert client.infer(observation).actions.shape == (10, 7)

"""Depth frames end to end (issue 43, item 3): from `Observation.depth` to a policy's input in
the default worker layout, bit for bit and in their own dtype, over HTTP and the realtime
websocket, in each encoding that carries them; and every refusal, one line each.

The oracle is outside the code under test: `DigestPolicy` answers the SHA-256 of the dtype,
shape and bytes it was given (`digest_policy.depth_bytes`), compared with `hashlib` on the
test's own arrays.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import cv2
import httpx
import numpy as np
import pytest

from digest_policy import DigestPolicy, sha256_rows
from vla_client import ActionClient, ContractError, Observation, ServerError
from vla_client.client.checks import mismatched_cameras
from vla_client.errors import CodecError
from vla_client.protocol import encode_request
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app

RNG = np.random.default_rng(43)
COLOUR = RNG.integers(0, 256, (30, 40, 3), dtype=np.uint8)
MILLIMETRES = RNG.integers(0, 65536, (30, 40), dtype=np.uint16)  # every bit of the range
METRES = RNG.uniform(0.2, 20.0, (30, 40)).astype(np.float32)
METRES[0, :3] = [np.nan, np.inf, -np.inf]  # the ZED's unknown, too far and too near
DEPTH = {"mm": "uint16", "m": "float32"}


@pytest.fixture(scope="module")
def depth_server() -> Iterator[LocalServer]:
    """A server in the default layout (a worker process, shared memory) whose policy takes a
    colour camera and two depth cameras, one of each dtype."""
    policy = DigestPolicy(cameras=3, depth_cameras=DEPTH)
    with LocalServer(create_app(policy, ServerConfig())) as running:
        yield running


@pytest.fixture(scope="module")
def millimetre_server() -> Iterator[LocalServer]:
    """As `depth_server`, with the uint16 depth camera only (for the encodings of uint16)."""
    policy = DigestPolicy(cameras=3, depth_cameras={"mm": "uint16"})
    with LocalServer(create_app(policy, ServerConfig())) as running:
        yield running


@pytest.fixture(scope="module")
def plain_server() -> Iterator[LocalServer]:
    """A server whose policy takes no depth."""
    with LocalServer(create_app(ReferencePolicy(), ServerConfig(in_process=True))) as running:
        yield running


def expected_rows(depth: dict[str, np.ndarray]) -> np.ndarray:
    return sha256_rows({"front": COLOUR, **depth}, None)


@pytest.mark.parametrize(
    ("encoding", "wire", "transport", "depth"),
    [
        ("raw", "msgpack", "http", {"mm": MILLIMETRES, "m": METRES}),
        ("raw", "msgpack", "websocket", {"mm": MILLIMETRES, "m": METRES}),
        ("raw", "msgpack", "http", {"mm": MILLIMETRES[:, :, None], "m": METRES.astype(">f4")}),
        ("png", "msgpack", "http", {"mm": MILLIMETRES}),
        ("png", "json", "http", {"mm": MILLIMETRES}),
        ("png", "msgpack", "websocket", {"mm": MILLIMETRES}),
        ("raw", "json", "http", {"mm": MILLIMETRES}),
    ],
)
def test_depth_reaches_the_policy_bit_for_bit_in_its_own_dtype(
    depth_server, millimetre_server, encoding, wire, transport, depth
):
    """Raw arrays (msgpack; uint16 on JSON as a tensor payload) and 16-bit PNG reach the policy
    in the worker process as HxW arrays of their dtype, native byte order, every bit kept (an
    HxWx1 or big-endian frame is the same frame); the digests say so too (``--verify``)."""
    server = millimetre_server if set(depth) == {"mm"} else depth_server
    observation = Observation({"front": COLOUR}, depth=depth)
    with ActionClient(server.url, encoding=encoding, wire=wire, transport=transport) as client:
        result = client.infer(observation, return_digest=True)
    given = {"mm": MILLIMETRES, "m": METRES}
    np.testing.assert_array_equal(result.actions, expected_rows({k: given[k] for k in depth}))
    assert mismatched_cameras(observation, result) == []
    assert result.digests is not None and result.digests["mm"]["dtype"] == "<u2"


def test_the_metadata_announces_the_depth_cameras_and_a_plain_server_none(
    depth_server, plain_server
):
    with ActionClient(depth_server.url) as client:
        assert client.metadata().input.depth_cameras == DEPTH
    assert httpx.get(f"{depth_server.url}/v1/actions/metadata").json()["input"][
        "depth_cameras"
    ] == DEPTH  # fmt: skip
    plain = httpx.get(f"{plain_server.url}/v1/actions/metadata").json()
    assert "depth_cameras" not in plain["input"]  # as servers announced before depth


@pytest.mark.parametrize(
    ("encoding", "wire", "dtype", "message"),
    [
        ("jpeg", "msgpack", "uint16",
         "a uint16 depth frame cannot travel as 'jpeg'; send it with encoding=\"raw\" or "
         "encoding=\"png\""),
        ("pixels", "json", "uint16",
         "a uint16 depth frame cannot travel as 'pixels'; send it with encoding=\"raw\" or "
         "encoding=\"png\""),
        ("png", "msgpack", "float32",
         "a float32 depth frame cannot travel as 'png'; send it with encoding=\"raw\""),
        ("jpeg", "json", "float32",
         "a float32 depth frame cannot travel as 'jpeg'; send it with encoding=\"raw\""),
        ("raw", "json", "float32",
         "float32 depth travels raw on wire=\"msgpack\" only (JSON has no NaN); or send uint16 "
         "millimetres"),
    ],
)  # fmt: skip
def test_an_encoding_that_cannot_carry_depth_exactly_is_refused_in_one_line(
    encoding, wire, dtype, message
):
    depth = {"d": MILLIMETRES if dtype == "uint16" else METRES}
    with pytest.raises(CodecError) as refused:
        encode_request(Observation({"front": COLOUR}, depth=depth), encoding=encoding, wire=wire)
    assert str(refused.value) == message


def test_openpi_requests_refuse_depth():
    with pytest.raises(CodecError, match=r"^openpi requests carry no depth frames \(d\); send "):
        encode_request(
            Observation({"front": COLOUR}, depth={"d": MILLIMETRES}), wire="msgpack", openpi="flat"
        )


def test_a_server_that_takes_no_depth_is_told_apart_on_both_sides(plain_server):
    """The client refuses before sending (the metadata announces no depth cameras); with the
    contract check off, the server refuses with a 400 whose detail is one line."""
    observation = Observation({"front": COLOUR}, depth={"d": MILLIMETRES})
    with (
        ActionClient(plain_server.url, encoding="raw", wire="msgpack") as client,
        pytest.raises(ContractError) as refused,
    ):
        client.infer(observation)
    assert str(refused.value) == (
        "input.depth_cameras: the server expects none, the observation has depth ['d']; "
        "this server takes no depth frames"
    )
    unchecked = ActionClient(plain_server.url, encoding="raw", wire="msgpack", check_contract=False)
    with unchecked as client, pytest.raises(ServerError) as answered:
        client.infer(observation)
    assert answered.value.status_code == 400
    detail = (
        "input.observation.depth: this server takes no depth frames (its metadata announces no "
        "input.depth_cameras); got depth for ['d']"
    )
    assert str(answered.value).endswith(detail)
    body, content_type = encode_request(observation, encoding="png", wire="json")
    reply = httpx.post(
        f"{plain_server.url}/v1/actions/generations",
        content=body,
        headers={"content-type": content_type},
    )
    assert reply.status_code == 400 and reply.json() == {"detail": detail}


def post(server: LocalServer, depth: dict[str, object]) -> httpx.Response:
    body = {
        "input": {
            "observation": {
                "images": {"front": {"values": COLOUR.reshape(-1).tolist(), "dtype": "uint8",
                                     "shape": list(COLOUR.shape)}},
                "depth": depth,
            }
        }
    }  # fmt: skip
    return httpx.post(f"{server.url}/v1/actions/generations", json=body)


def png_text(frame: np.ndarray) -> dict[str, str]:
    return {"b64_json": base64.b64encode(cv2.imencode(".png", frame)[1].tobytes()).decode()}


@pytest.mark.parametrize(
    ("depth", "detail"),
    [
        ({"mm": {"values": [1, 2], "dtype": "uint16", "shape": [1, 2]}},
         "input.observation.depth: unknown depth cameras [], missing depth cameras ['m']; "
         "this policy takes depth {'mm': 'uint16', 'm': 'float32'}"),
        ({"mm": {"values": [1.5, 2.5], "dtype": "float32", "shape": [1, 2]},
          "m": {"values": [1.5, 2.5], "dtype": "float32", "shape": [1, 2]}},
         "input.observation.depth: depth frames of dtype {'mm': 'float32'}; this policy takes "
         "depth {'mm': 'uint16', 'm': 'float32'} (uint16 millimetres, float32 metres; never "
         "converted)"),
        ({"mm": [[1, 2]]},
         "input.observation.depth.mm: a depth frame is an array, a tensor payload with its "
         "dtype or a 16-bit PNG, got list"),
        ({"mm": {"values": [1, 2], "shape": [1, 2]}},
         "input.observation.depth.mm: depth frames are uint16 (millimetres) or float32 "
         "(metres), got int64; convert it yourself (a depth value is never rescaled here)"),
        ({"mm": png_text(np.zeros((2, 2), np.uint8))},
         "input.observation.depth.mm: a depth PNG must be 16-bit grey, got 8-bit colour type 0"),
        ({"mm": png_text(np.zeros((2, 2, 3), np.uint16))},
         "input.observation.depth.mm: a depth PNG must be 16-bit grey, got 16-bit colour type 2"),
        ("no", "input.observation.depth: depth must be an object keyed by camera name"),
    ],
)  # fmt: skip
def test_depth_the_policy_cannot_take_is_a_400_naming_why(depth_server, depth, detail):
    reply = post(depth_server, depth)
    assert reply.status_code == 400 and reply.json() == {"detail": detail}


def test_a_recording_server_keeps_the_depth_it_was_sent(tmp_path):
    """``serve --record``: the request's depth frames are in the recording, dtype and bits."""
    from vla_client.recording import load_observations
    from vla_client.server.config import RecordSettings

    folder = tmp_path / "records"
    config = ServerConfig(record=RecordSettings(str(folder)))
    policy = DigestPolicy(cameras=3, depth_cameras=DEPTH)
    observation = Observation({"front": COLOUR}, depth={"mm": MILLIMETRES, "m": METRES})
    server = LocalServer(create_app(policy, config))
    with server, ActionClient(server.url, encoding="raw", wire="msgpack") as client:
        client.infer(observation)
    (recording,) = folder.glob("*.vlaobs")
    (step,) = load_observations(recording)
    for name, want in (("mm", MILLIMETRES), ("m", METRES)):
        got = step.observation.depth[name]
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    np.testing.assert_array_equal(step.observation.images["front"], COLOUR)


@pytest.mark.parametrize(("encoding", "wire"), [("png", "json"), ("raw", "msgpack")])
def test_a_request_without_depth_is_what_it_was(encoding, wire):
    """No depth, no ``depth`` key: an RGB request's body is the document it always was."""
    from vla_client.protocol import loads

    body, _ = encode_request(Observation({"front": COLOUR}), encoding=encoding, wire=wire)
    assert set(loads(body, wire)["input"]["observation"]) == {"images"}

"""Every encoding and wire through a real uvicorn server, checked pixel for pixel."""

import httpx
import msgpack
import numpy as np
import pytest

from oracles import assert_actions_equal, frame_digest_of, oracle_actions
from vla_client import ActionClient, Observation, encode_request
from vla_client.client import mismatched_cameras
from vla_client.codecs import decode_image_bytes, encode_jpeg, msgpack_numpy
from vla_client.protocol import ENCODINGS, WIRES, read_actions


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("wire", WIRES)
def test_round_trip_for_every_encoding_and_wire(server_url, observation, encoding, wire):
    with ActionClient(server_url, encoding=encoding, wire=wire) as client:
        result = client.infer(observation, return_digest=True)
    assert result.actions.dtype == np.float32 and result.actions.shape == (10, 7)
    assert result.request_id is not None and result.request_id.startswith("act_")
    assert set(result.digests) == set(observation.images)
    # The server's digests against SHA-256 of the sent frames' C-order bytes, hashed here.
    sent = {name: frame_digest_of(frame) for name, frame in observation.images.items()}
    if encoding == "jpeg":
        assert mismatched_cameras(observation, result) == list(observation.images)
        assert all(result.digests[name] != sent[name] for name in sent)
    else:
        assert mismatched_cameras(observation, result) == []
        assert result.digests == sent
        assert_actions_equal(result.actions, oracle_actions(observation, horizon=10, action_dim=7))
    timings = result.timings
    assert timings.bytes_sent > 0 and timings.round_trip_ms > 0 and timings.encode_ms > 0
    assert {"preprocess_ms", "inference_ms", "total_ms"} <= set(timings.server)


def test_jpeg_q90_over_the_server_keeps_35_db(server_url, camera_frames):
    observation = Observation(camera_frames)
    with ActionClient(server_url, encoding="jpeg", wire="msgpack", jpeg_quality=90) as client:
        result = client.infer(observation, return_digest=True)
    for name, frame in camera_frames.items():
        # The server's digest is of its decode; the same decoder here must give the same pixels.
        decoded = decode_image_bytes(encode_jpeg(frame, 90))
        assert result.digests[name] == frame_digest_of(decoded)
        mse = np.mean((decoded.astype(float) - frame) ** 2)
        assert 10 * np.log10(255**2 / mse) >= 35


def test_metadata_and_health(server_url):
    with ActionClient(server_url) as client:
        metadata = client.metadata()
    assert metadata.object == "action.metadata" and metadata.output.action_horizon == 10
    assert metadata.output.action_dim == 7 and metadata.capabilities["return_digest"] is True
    assert httpx.get(f"{server_url}/health").json() == {"status": "ok"}


def test_raw_response_format_and_numpy_output(server_url, observation):
    body, content_type = encode_request(
        observation, runtime={"response_format": "raw", "output_format": "numpy"}
    )
    reply = httpx.post(
        f"{server_url}/v1/actions/generations", content=body, headers={"content-type": content_type}
    )
    document = reply.json()
    assert reply.status_code == 200 and set(document) >= {
        "request_id",
        "actions",
        "parameters",
        "timings",
    }
    assert np.asarray(document["actions"]).shape == (10, 7)


def test_accept_msgpack_turns_a_json_request_into_a_msgpack_reply(server_url, observation):
    body, content_type = encode_request(observation, request_id="abc")
    reply = httpx.post(
        f"{server_url}/v1/actions/generations",
        content=body,
        headers={"content-type": content_type, "accept": "application/msgpack"},
    )
    assert reply.headers["content-type"] == "application/msgpack"
    document = msgpack.unpackb(reply.content, raw=False)
    assert document["id"] == "abc" and document["data"][0]["action"]["shape"] == [10, 7]


def test_return_timing_false_drops_timings(server_url, observation):
    body, content_type = encode_request(observation, runtime={"return_timing": False})
    reply = httpx.post(
        f"{server_url}/v1/actions/generations", content=body, headers={"content-type": content_type}
    )
    assert reply.status_code == 200 and "timings" not in reply.json()


def test_action_horizon_parameter_reaches_the_policy(server_url, observation):
    with ActionClient(server_url) as client:
        assert client.infer(observation, action_horizon=4).actions.shape == (4, 7)


def test_msgpack_bodies_with_and_without_a_content_length_give_the_same_chunk(
    server_url, observation
):
    """With a length the body is read into shared memory; chunked, it is collected in memory."""
    body, content_type = encode_request(observation, encoding="raw", wire="msgpack")

    def chunked():
        for start in range(0, len(body), 50_000):
            yield body[start : start + 50_000]

    url = f"{server_url}/v1/actions/generations"
    replies = [
        httpx.post(url, content=content, headers={"content-type": content_type})
        for content in (body, chunked())
    ]
    assert [reply.status_code for reply in replies] == [200, 200]
    chunks = [read_actions(msgpack_numpy.unpackb(reply.content))[0] for reply in replies]
    np.testing.assert_array_equal(chunks[0], chunks[1])
    assert_actions_equal(chunks[0], oracle_actions(observation, horizon=10, action_dim=7))

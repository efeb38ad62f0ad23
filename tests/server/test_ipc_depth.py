"""Depth frames over ``ipc://``: each travels as a raw array of its own dtype in the client's
shared memory beside the colour frames (never in the socket's body), and reaches the policy in
the worker process bit for bit, as over HTTP; depth the server does not take is its 400, as over
HTTP; a depth frame that a request misplaces or misdescribes is a 400 naming it.

The oracle is outside the code under test: `DigestPolicy` answers the SHA-256 of the dtype,
shape and bytes of each frame it was given, compared with `hashlib` on the test's own arrays.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest
from test_ipc import mine, raw_request

from digest_policy import DigestPolicy, sha256_rows
from vla_client import ActionClient, Observation, ServerError
from vla_client.protocol import loads
from vla_client.protocol.ipc import FrameLayout, Infer, encode_request_apart
from vla_client.server import LocalServer, ServerConfig, create_app
from vla_client.server.worker import WorkerRunner

RNG = np.random.default_rng(44)
COLOUR = RNG.integers(0, 256, (30, 40, 3), dtype=np.uint8)
MILLIMETRES = RNG.integers(0, 65536, (30, 40), dtype=np.uint16)  # every bit of the range
METRES = RNG.uniform(0.2, 20.0, (30, 40)).astype(np.float32)
METRES[0, :3] = [np.nan, np.inf, -np.inf]  # a depth camera's unknown, too far and too near
DEPTH = {"mm": "uint16", "m": "float32"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalServer, str]]:
    """A policy taking a colour camera and a depth camera of each dtype, in its worker
    process, on a port and at ``ipc://``."""
    path = str(tmp_path_factory.mktemp("ipc") / "d.sock")
    policy = DigestPolicy(cameras=3, depth_cameras=DEPTH)
    with LocalServer(create_app(policy, ServerConfig(port=0, ipc_path=path))) as server:
        assert isinstance(server.app.state.pipeline.runner, WorkerRunner)
        yield server, path


def with_depth() -> Observation:
    return Observation({"front": COLOUR}, depth={"mm": MILLIMETRES, "m": METRES})


def test_depth_reaches_the_policy_in_its_own_dtype_as_over_http(served):
    server, path = served
    sent = with_depth()
    with (
        ActionClient(f"ipc://{path}") as ipc,
        ActionClient(server.url, encoding="raw", wire="msgpack") as http,
    ):
        over_ipc = ipc.infer(sent, return_digest=True)
        over_http = http.infer(sent, return_digest=True)
    expected = sha256_rows({"front": COLOUR, "mm": MILLIMETRES, "m": METRES}, None)
    np.testing.assert_array_equal(over_ipc.actions, expected)
    np.testing.assert_array_equal(over_ipc.actions, over_http.actions)
    assert over_ipc.digests == over_http.digests == over_ipc.sent_digests
    assert over_ipc.digests is not None and over_ipc.digests["m"]["dtype"] == "<f4"
    # what was sent: the body without frames, and each frame once, in its own dtype
    frames = COLOUR.nbytes + MILLIMETRES.nbytes + METRES.nbytes
    assert frames < over_ipc.timings.bytes_sent < frames + MILLIMETRES.nbytes


def test_the_socket_s_body_carries_no_depth():
    body, _ = encode_request_apart(with_depth(), request_id="act_1")
    observation = loads(body, "msgpack")["input"]["observation"]
    assert observation["images"] == {} and "depth" not in observation


def test_depth_the_policy_does_not_take_is_the_server_s_400(served):
    _, path = served
    extra = Observation({"front": COLOUR}, depth={"mm": MILLIMETRES, "m": METRES, "x": MILLIMETRES})
    with (
        ActionClient(f"ipc://{path}", check_contract=False) as client,
        pytest.raises(ServerError) as refused,
    ):
        client.infer(extra)
    assert refused.value.status_code == 400
    assert "unknown depth cameras ['x']" in str(refused.value)


def test_a_misdescribed_depth_frame_is_a_400_naming_it(served):
    _, path = served
    with ActionClient(f"ipc://{path}") as client:
        client.infer(with_depth())
        (name,) = mine(os.getpid())
        size = client.transport.frames._idle[0].size
        colour = (FrameLayout("front", (30, 40, 3), 0),)
        for depth, said in [
            (FrameLayout("mm", (30, 40), 4096, "int32"), b"HxW uint16 or float32"),
            (FrameLayout("mm", (30, 40, 3), 4096, "uint16"), b"got uint16 of shape [30, 40, 3]"),
            (FrameLayout("m", (size, 40), 4096, "float32"), b"past the end"),
        ]:
            answer = raw_request(path, Infer(b"\x80", name, colour, None, (depth,)))
            assert answer.status == 400 and said in answer.body, answer
            assert f"input.observation.depth.{depth.camera}".encode() in answer.body

"""Every server limit exactly at, one below and one above, through real servers in both layouts.

The limits: pixels per image (`DecodeLimits.max_image_pixels`, checked on arrays and on the
PNG/JPEG header before decoding), cameras per request (`DecodeLimits.max_cameras`), body bytes
(`ServerConfig.max_body_bytes`, with and without a Content-Length), websocket message bytes
(`ServerConfig.max_ws_message_bytes`) and requests in flight (`WorkerSettings.queue_size`). At
the limit a request is served; one over, it gets its 413 (or 503) and the server goes on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from gated_policy import GatedPolicy
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from vla_client.codecs import msgpack_numpy
from vla_client.observation import Observation
from vla_client.protocol import GENERATIONS_PATH, DecodeLimits, encode_request
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.config import WorkerSettings
from vla_client.server.worker import SEGMENT_PREFIX

MAX_PIXELS = 24 * 32
MAX_CAMERAS = 3
MAX_BODY = 40_000
MAX_WS_MESSAGE = 30_000
QUEUE_SIZE = 3


def pid_segments() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith(f"{SEGMENT_PREFIX}{os.getpid()}_")}


@pytest.fixture(scope="module", params=["worker", "in_process"])
def server(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    config = ServerConfig(
        in_process=request.param == "in_process",
        max_body_bytes=MAX_BODY,
        max_ws_message_bytes=MAX_WS_MESSAGE,
        limits=DecodeLimits(max_cameras=MAX_CAMERAS, max_image_pixels=MAX_PIXELS),
    )
    before = pid_segments()
    with LocalServer(create_app(ReferencePolicy(), config)) as running:
        yield running
    assert pid_segments() <= before, "the server left shared-memory segments behind"


def frame(height: int, width: int) -> np.ndarray:
    return np.random.default_rng(height * 1000 + width).integers(
        0, 256, (height, width, 3), dtype=np.uint8
    )


def post(server: LocalServer, body: bytes | Iterator[bytes], content_type: str) -> httpx.Response:
    return httpx.post(
        server.url + GENERATIONS_PATH,
        content=body,
        headers={"content-type": content_type},
        timeout=30,
    )


def assert_serving(server: LocalServer) -> None:
    body, content_type = encode_request(Observation({"cam": frame(8, 8)}), encoding="raw")
    reply = post(server, body, content_type)
    assert reply.status_code == 200, reply.text


def body_of_size(size: int, wire: str, encoding: str = "raw") -> tuple[bytes, str]:
    """A valid request of exactly `size` bytes: one 8x8 camera, the task padded to fit."""
    pad = 0
    for _ in range(8):
        observation = Observation({"cam": frame(8, 8)}, task="x" * pad)
        body, content_type = encode_request(observation, encoding=encoding, wire=wire)  # type: ignore[arg-type]
        if len(body) == size:
            return body, content_type
        pad += size - len(body)
    raise AssertionError(f"no {wire} body of exactly {size} bytes")


def chunks(body: bytes) -> Iterator[bytes]:
    """The body in pieces, so httpx sends it chunked, without a Content-Length."""
    for start in range(0, len(body), 4096):
        yield body[start : start + 4096]


@pytest.mark.parametrize("encoding", ["raw", "png", "jpeg"])
@pytest.mark.parametrize(
    ("shape", "status"),
    [((13, 59), 200), ((24, 32), 200), ((1, 769), 413)],  # 767, 768 and 769 pixels
    ids=["one-below", "at", "one-above"],
)
def test_the_pixel_limit(
    server: LocalServer, encoding: str, shape: tuple[int, int], status: int
) -> None:
    assert shape[0] * shape[1] - MAX_PIXELS in (-1, 0, 1)
    observation = Observation({"cam": frame(*shape)})
    body, content_type = encode_request(observation, encoding=encoding, wire="msgpack")  # type: ignore[arg-type]
    reply = post(server, body, content_type)
    assert reply.status_code == status, reply.text
    if status == 413:
        detail = reply.json()["detail"]
        assert "769" in detail and str(MAX_PIXELS) in detail and "images.cam" in detail
    assert_serving(server)


@pytest.mark.parametrize(("cameras", "status"), [(2, 200), (3, 200), (4, 413)])
def test_the_camera_limit(server: LocalServer, cameras: int, status: int) -> None:
    images = {f"cam{i}": frame(8, 8) for i in range(cameras)}
    body, content_type = encode_request(Observation(images), encoding="raw", wire="msgpack")
    reply = post(server, body, content_type)
    assert reply.status_code == status, reply.text
    if status == 413:
        assert f"{cameras} cameras, over the limit of {MAX_CAMERAS}" in reply.json()["detail"]
    assert_serving(server)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
@pytest.mark.parametrize("wire", ["json", "msgpack"])
@pytest.mark.parametrize(
    ("size", "status"),
    [(MAX_BODY - 1, 200), (MAX_BODY, 200), (MAX_BODY + 1, 413)],
    ids=["one-below", "at", "one-above"],
)
def test_the_body_limit(
    server: LocalServer, wire: str, framing: str, size: int, status: int
) -> None:
    body, content_type = body_of_size(size, wire)
    reply = post(server, body if framing == "content-length" else chunks(body), content_type)
    assert reply.status_code == status, reply.text
    if status == 413:
        assert str(MAX_BODY) in reply.json()["detail"]
    assert_serving(server)


@pytest.mark.parametrize(
    ("size", "served"),
    [(MAX_WS_MESSAGE - 1, True), (MAX_WS_MESSAGE, True), (MAX_WS_MESSAGE + 1, False)],
    ids=["one-below", "at", "one-above"],
)
def test_the_websocket_message_limit(server: LocalServer, size: int, served: bool) -> None:
    frame_bytes, _ = body_of_size(size, "msgpack")
    url = f"ws://127.0.0.1:{server.port}/v1/actions/realtime"
    with connect(url, compression=None, open_timeout=10, close_timeout=2) as ws:
        ws.recv(timeout=10)  # the metadata frame
        ws.send(frame_bytes)
        if served:
            reply = msgpack_numpy.unpackb(ws.recv(timeout=30))
            assert reply["data"][0]["action"]["shape"] == [16, 7]
        else:
            with pytest.raises(ConnectionClosed) as closed:
                while True:  # an error frame may come first; nothing else may
                    message = ws.recv(timeout=10)
                    assert "data" not in msgpack_numpy.unpackb(message)
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code in (1009, 4413)  # the websocket layer's, or ours
    assert_serving(server)


@pytest.fixture(scope="module")
def gated_server() -> Iterator[LocalServer]:
    settings = WorkerSettings(max_batch=1, queue_size=QUEUE_SIZE)
    policy = GatedPolicy()
    before = pid_segments()
    with LocalServer(create_app(policy, ServerConfig(worker=settings))) as running:
        yield running
    assert pid_segments() <= before, "the server left shared-memory segments behind"


def gated_body(task: str) -> bytes:
    return encode_request(Observation({"cam": frame(8, 8)}, task=task), wire="msgpack")[0]


def test_the_queue_takes_exactly_queue_size_requests(
    gated_server: LocalServer, tmp_path: Path
) -> None:
    """Queue size requests in flight are all served; the one past them gets 503 at once."""
    gate = tmp_path / "open"
    body = gated_body(f"wait:{gate}")
    with ThreadPoolExecutor(QUEUE_SIZE) as pool:
        held = [pool.submit(post, gated_server, body, "application/msgpack")]
        time.sleep(1.0)  # the first is in the worker; ample time for it to be admitted
        held += [pool.submit(post, gated_server, body, "application/msgpack")]
        time.sleep(1.0)  # one below the limit: admitted, not refused
        assert not any(future.done() for future in held), [f.result().text for f in held]
        held += [pool.submit(post, gated_server, body, "application/msgpack")]
        time.sleep(1.0)  # at the limit: admitted too
        assert not any(future.done() for future in held), [f.result().text for f in held]
        started = time.monotonic()
        over = post(gated_server, gated_body("fine"), "application/msgpack")
        assert time.monotonic() - started < 5.0, "the 503 must not wait for the queue"
        assert over.status_code == 503, over.text
        assert over.headers["retry-after"] == "1"
        assert f"{QUEUE_SIZE} requests already queued or running" in over.json()["detail"]
        gate.touch()
        replies = [future.result(timeout=30) for future in held]
    assert [reply.status_code for reply in replies] == [200] * QUEUE_SIZE
    assert_serving(gated_server)

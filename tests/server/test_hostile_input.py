"""Hostile requests: bombs, nesting, huge integers, slow and broken bodies.

Each is refused with a 4xx (or ends quietly when the client is gone), no unhandled error is
logged, and a good request right after it still succeeds.
"""

from __future__ import annotations

import io
import logging
import socket
import struct
import time
import zlib
from collections.abc import Iterator

import httpx
import msgpack
import numpy as np
import pytest
from PIL import Image
from served import LAYOUTS, Resources, serve

from vla_client.client import ActionClient
from vla_client.codecs import b64encode_text, encode_jpeg
from vla_client.observation import Observation
from vla_client.protocol import DecodeLimits
from vla_client.server import LocalServer, ReferencePolicy
from vla_client.server.config import WorkerSettings

GOOD = Observation({"cam": np.full((24, 32, 3), 60, np.uint8)}, state=[0.1], task="ok")


QUEUE = 8


@pytest.fixture(scope="module", params=LAYOUTS)
def server(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    """The server in the default worker layout and in-process, each for the whole module."""
    running = serve(
        ReferencePolicy(),
        request.param,
        body_timeout_s=1.0,
        limits=DecodeLimits(max_image_pixels=1024 * 1024),
        worker=WorkerSettings(queue_size=QUEUE),
    )
    yield running
    running.stop()


@pytest.fixture(autouse=True)
def still_serving(server: LocalServer, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """After each hostile request: no unhandled error logged, a good request succeeds, and no
    descriptor or shared-memory segment was left behind."""
    resources = Resources(keep=QUEUE, server=server)
    with caplog.at_level(logging.ERROR, logger="vla_client.server"):
        yield
    assert not [r for r in caplog.records if r.name == "vla_client.server"]
    with ActionClient(server.url) as client:
        assert client.infer(GOOD).actions.shape == (16, 7)
    resources.check()


def _post(
    server: LocalServer, body: bytes, content_type: str = "application/json"
) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/actions/generations",
        content=body,
        headers={"Content-Type": content_type},
        timeout=10,
    )


def _image_request(data: bytes) -> bytes:
    document = {"input": {"observation": {"images": {"cam": {"b64_json": b64encode_text(data)}}}}}
    return httpx.Request("POST", "/", json=document).content


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bomb(width: int, height: int) -> bytes:
    """A few hundred bytes claiming width x height RGB pixels, all zero rows."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = zlib.compress(b"\x00" * (1 + 3 * min(width, 4096)) * 64, 9)
    return (
        b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", rows) + _png_chunk(b"IEND", b"")
    )  # fmt: skip


def jpeg_bomb(width: int, height: int) -> bytes:
    """A real small JPEG whose frame header is rewritten to claim width x height."""
    data = bytearray(encode_jpeg(np.zeros((16, 16, 3), np.uint8)))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def bmp_bomb(width: int, height: int) -> bytes:
    """A BMP (decoded through Pillow, not OpenCV) with forged dimensions."""
    buffer = io.BytesIO()
    Image.new("RGB", (2, 2)).save(buffer, "BMP")
    data = bytearray(buffer.getvalue())
    data[18:26] = struct.pack("<ii", width, height)
    return bytes(data)


@pytest.mark.parametrize("bomb", [png_bomb, jpeg_bomb, bmp_bomb])
@pytest.mark.parametrize("size", [(50_000, 50_000), (65_535, 17)])
def test_decompression_bombs_are_refused_from_the_header(
    server: LocalServer, bomb: object, size: tuple[int, int]
) -> None:
    data = bomb(*size)  # type: ignore[operator]
    assert len(data) < 100_000
    started = time.monotonic()
    reply = _post(server, _image_request(data))
    assert reply.status_code == 413, reply.text
    assert "pixels" in reply.json()["detail"]
    assert time.monotonic() - started < 5  # refused before decoding, not after


def test_msgpack_raw_image_bytes_bomb(server: LocalServer) -> None:
    body = msgpack.packb({"input": {"observation": {"images": {"cam": png_bomb(40_000, 40_000)}}}})
    assert _post(server, body, "application/msgpack").status_code == 413


@pytest.mark.parametrize("depth", [1_000, 200_000])
def test_deeply_nested_json(server: LocalServer, depth: int) -> None:
    nested = b"[" * depth + b"]" * depth
    assert _post(server, nested).status_code == 400
    inside = b'{"input": {"observation": {"images": {"cam": ' + nested + b"}}}}"
    assert _post(server, inside).status_code == 400


def test_deeply_nested_msgpack(server: LocalServer) -> None:
    nested = b"\x91" * 200_000 + b"\xc0"
    assert _post(server, nested, "application/msgpack").status_code == 400
    padding = b"\xa3pad\xc5" + (20_000).to_bytes(2, "big") + bytes(20_000)  # a big map's walk
    inside = b"\x82\xa5input" + nested + padding
    reply = _post(server, inside, "application/msgpack")
    assert reply.status_code == 400 and "nest" in reply.json()["detail"]


@pytest.mark.parametrize(
    "pixel",
    [b"1" * 5000, b"18446744073709551616", b"9223372036854775808", b"-1", b"256", b"1e400"],
)
def test_huge_integers_in_pixel_lists(server: LocalServer, pixel: bytes) -> None:
    row = b"[" + b",".join([b"[" + pixel + b",0,0]"] + [b"[0,0,0]"] * 3) + b"]"
    body = b'{"input": {"observation": {"images": {"cam": [' + b",".join([row] * 4) + b"]}}}}"
    reply = _post(server, body)
    assert reply.status_code == 400, reply.text


def test_huge_integers_in_msgpack_pixel_lists(server: LocalServer) -> None:
    for big in (2**64 - 1, -(2**63), 2**40):
        document = {"input": {"observation": {"images": {"cam": [[[big, 0, 0]] * 2] * 2}}}}
        assert _post(server, msgpack.packb(document), "application/msgpack").status_code == 400


def _raw_request(server: LocalServer, content_length: int) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=10)
    sock.sendall(
        b"POST /v1/actions/generations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {content_length}\r\n\r\n".encode()
    )
    return sock


def test_slow_drip_body_gets_408(server: LocalServer) -> None:
    with _raw_request(server, 1000) as sock:
        started = time.monotonic()
        reply = b""
        sock.settimeout(0.25)
        while not reply and time.monotonic() - started < 8:
            try:
                sock.sendall(b" ")
                reply = sock.recv(4096)
            except TimeoutError:
                continue
        assert reply.startswith(b"HTTP/1.1 408"), reply
        assert time.monotonic() - started < 8


def test_client_disconnect_mid_body(server: LocalServer) -> None:
    for _ in range(5):
        with _raw_request(server, 100_000) as sock:
            sock.sendall(b'{"input": {"observation": ' + b" " * 1000)
    time.sleep(0.3)  # let the server notice the disconnects
    # Five half-sent bodies must not hold the server: it still answers at once.
    assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200
    # The autouse `still_serving` check then asserts no error was logged and a request succeeds.


def test_oversized_headers_are_refused(server: LocalServer) -> None:
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n")
        reply = sock.recv(4096)
    assert reply == b"" or reply.split(b" ", 2)[1] in (b"400", b"431"), reply

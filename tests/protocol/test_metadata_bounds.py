"""Metadata sizes and counts out of bounds are a `ProtocolError` when read (issue 22, item 7)."""

from __future__ import annotations

import socket
from typing import Any

import numpy as np
import orjson
import pytest

from raw_http_server import RawHTTPServer, RawRequest
from vla_client.client import ActionClient
from vla_client.codecs import DEFAULT_MAX_PIXELS
from vla_client.errors import ProtocolError
from vla_client.observation import Observation
from vla_client.protocol import check_metadata_bounds, read_metadata
from vla_client.protocol.models import (
    MAX_METADATA_ACTION_VALUES,
    MAX_METADATA_CAMERAS,
    MAX_METADATA_DIM,
    MAX_METADATA_PIXELS,
)
from vla_client.transports import NO_RETRY


def test_the_pixel_limit_is_the_servers_own_default() -> None:
    assert MAX_METADATA_PIXELS == DEFAULT_MAX_PIXELS


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({"input": {"image_size": [60000, 60000]}}, "over the limit of 16777216 pixels"),
        ({"input": {"image_size": 60000}}, "over the limit"),
        ({"input": {"image_size": [3, 4097, 4096]}}, "over the limit"),
        ({"input": {"image_size": {"height": 8192, "width": 2049}}}, "over the limit"),
        ({"input": {"image_size": [0, 224]}}, "must be positive whole numbers"),
        ({"input": {"image_size": [224, -1]}}, "must be positive whole numbers"),
        ({"input": {"image_size": [224.0, 224]}}, "must be positive whole numbers"),
        ({"input": {"image_size": {"height": 224}}}, "must be positive whole numbers"),
        ({"input": {"state_dim": -1}}, r"input.state_dim is -1, outside 0..65536"),
        ({"input": {"state_dim": True}}, "input.state_dim must be a whole number"),
        ({"output": {"action_dim": 0}}, r"output.action_dim is 0, outside 1..65536"),
        ({"output": {"action_horizon": -4}}, r"output.action_horizon is -4"),
        ({"output": {"action_horizon": MAX_METADATA_DIM + 1}}, "outside 1..65536"),
        ({"output": {"padded_action_dim": 0}}, "output.padded_action_dim is 0"),
        ({"output": {"action_dim": 7.5}}, "output.action_dim must be a whole number"),
        ({"output": {"action_horizon": 4096, "action_dim": 4096}}, "over the limit of 1048576"),
        (  # the width a server pads its chunk to is bounded as the chunk is
            {"output": {"action_horizon": 1025, "action_dim": 7, "padded_action_dim": 1024}},
            r"1025 x 1024 padded action chunks, over the limit of 1048576",
        ),
        (
            {"output": {"action_horizon": 1025, "padded_action_dim": 1024}},
            r"1025 x 1024 padded action chunks",
        ),
        ({"input": {"image_keys": [f"c{i}" for i in range(17)]}}, "17 cameras, over the limit"),
    ],
)
def test_out_of_bounds_metadata_is_a_protocol_error(metadata: dict[str, Any], message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        check_metadata_bounds(metadata)
    with pytest.raises(ProtocolError, match=message):
        read_metadata(metadata)


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"input": None, "output": "odd"},  # forms are checked where they are used
        {"input": {"image_size": [4096, 4096], "state_dim": 0, "image_keys": ["a"] * 16}},
        {"input": {"image_size": [224, 224, 3]}},
        {"input": {"image_size": [1, 1]}},  # positive is enough here; the fit bounds the least
        {"output": {"action_horizon": 1024, "action_dim": MAX_METADATA_ACTION_VALUES // 1024}},
        {"output": {"action_horizon": 1024, "action_dim": 7, "padded_action_dim": 1024}},
        {"output": {"action_dim": 7, "padded_action_dim": 65536}},  # no horizon, no chunk
        {"input": {"image_keys": ["a"] * MAX_METADATA_CAMERAS}},
    ],
)
def test_metadata_at_the_bounds_passes(metadata: dict[str, Any]) -> None:
    check_metadata_bounds(metadata)


def test_read_metadata_gives_a_protocol_error_not_pydantics() -> None:
    with pytest.raises(ProtocolError, match="expected an object, got list"):
        read_metadata([])
    with pytest.raises(ProtocolError, match=r"^metadata input.image_keys must be a list of names"):
        read_metadata({"input": {"image_keys": "wrist"}})
    with pytest.raises(
        ProtocolError, match=r"^metadata input.camera_aliases must be an object, got \['top'\]$"
    ):
        read_metadata({"input": {"camera_aliases": ["top"]}})
    with pytest.raises(
        ProtocolError, match=r"^the server's metadata is malformed: metadata.model: "
    ):
        read_metadata({"model": 3})
    assert read_metadata({"output": {"action_horizon": 8}}).output.action_horizon == 8


def test_a_server_announcing_a_huge_required_frame_gets_a_protocol_error_before_padding() -> None:
    # Before, the client tried to pad the frame to 60000 x 60000 (10.8 GB) and died of
    # MemoryError; now it refuses the metadata and sends nothing.
    metadata = {"input": {"image_size": [60000, 60000], "image_size_required": True}}

    def answer(request: RawRequest, conn: socket.socket) -> None:
        body = orjson.dumps(metadata)
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
        conn.sendall(head.encode() + b"\r\n\r\n" + body)

    observation = Observation({"wrist": np.zeros((32, 32, 3), np.uint8)})
    with RawHTTPServer(answer) as server, ActionClient(server.url, retry=NO_RETRY) as client:
        with pytest.raises(ProtocolError, match="over the limit of 16777216 pixels"):
            client.infer(observation)
        with pytest.raises(ProtocolError, match="over the limit of 16777216 pixels"):
            client.metadata()
    assert [r.line.split()[1] for r in server.requests] == ["/v1/actions/metadata"] * 2

"""The ``ipc://`` wire: the action API over a Unix socket, its frames in shared memory.

A robot and its policy server on one host (``vla-client serve --ipc PATH``) need not push
megabytes of frames through a socket: the client writes each frame once into a shared-memory
segment of its own (`vla_client.segments`), and the socket carries the rest. Each message on
the stream socket is a 4-byte big-endian length and a msgpack record of this module:

- the server speaks first, `Hello` (which says it is a server of this package: a socket that
  says anything else is not one);
- the client sends `Metadata` (the metadata document) or `Infer`: an action API request
  (the same document as over HTTP, `encode_request_apart`, with no images and no depth in it),
  the segment's name and where each frame lies in it (`FrameLayout`): the colour frames, HxWx3
  uint8, and the depth frames, HxW uint16 or float32, each as its own raw array;
- the server answers each with one `Answer`: a status, its content type, the body and the
  headers that matter (``Retry-After``), which the client reads exactly as an HTTP reply
  (`vla_client.protocol.read_reply`).

The API key, when the server has one, travels in every request (`Infer.api_key`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from vla_client.observation import Observation
from vla_client.protocol.request import request_payload
from vla_client.protocol.wire import CONTENT_TYPES, dumps

SCHEME = "ipc"
GREETING = "vla-client-ipc"
VERSION = 1
LENGTH_BYTES = 4
MAX_REQUEST_BYTES = 1 << 20
"""Largest request record the server reads: a request without its frames is a few KiB."""


class Hello(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """The server's first message: `greeting` is `GREETING`, `version` the wire's version."""

    greeting: str
    version: int


class FrameLayout(msgspec.Struct, frozen=True, array_like=True):
    """Where one camera's frame lies in the client's segment: an array of `shape` and `dtype`
    at `offset` (a colour frame HxWx3 uint8, a depth frame HxW uint16 or float32)."""

    camera: str
    shape: tuple[int, ...]
    offset: int
    dtype: str = "uint8"


class Metadata(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """Ask for the server's metadata document."""

    api_key: str | None = None


class Infer(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """One action request: `body` is its document without images or depth (msgpack), its
    colour frames are in the segment `segment` where `frames` say, its depth frames where
    `depth` says."""

    body: bytes
    segment: str
    frames: tuple[FrameLayout, ...]
    api_key: str | None = None
    depth: tuple[FrameLayout, ...] = ()


class Answer(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """The server's answer to one request, as an HTTP reply would carry it."""

    status: int
    content_type: str
    body: bytes
    headers: dict[str, str] = {}


@dataclass(frozen=True)
class SharedFrames:
    """The frames of one ``ipc://`` request, which travel in shared memory apart from its body:
    colour `images` (HxWx3 uint8) and `depth` frames (HxW uint16 or float32) by camera name."""

    images: Mapping[str, np.ndarray]
    depth: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """The bytes the frames take."""
        return sum(frame.nbytes for frame in (*self.images.values(), *self.depth.values()))


Request = Metadata | Infer
encode = msgspec.msgpack.Encoder().encode
decode_request = msgspec.msgpack.Decoder(Request).decode
decode_answer = msgspec.msgpack.Decoder(Answer).decode
decode_hello = msgspec.msgpack.Decoder(Hello).decode


def framed(record: msgspec.Struct) -> bytes:
    """`record` as it goes on the socket: its length, then its msgpack."""
    packed = encode(record)
    return len(packed).to_bytes(LENGTH_BYTES, "big") + packed


def ipc_path(url: str) -> str:
    """The socket path of an ``ipc://PATH`` URL (``ipc:///run/vla.sock``: ``/run/vla.sock``);
    `ValueError` for another scheme or no path."""
    prefix = f"{SCHEME}://"
    if not isinstance(url, str) or not url.startswith(prefix) or len(url) == len(prefix):
        raise ValueError(f"an ipc URL is ipc://PATH to the server's socket; got {url!r}")
    return url[len(prefix) :]


def encode_request_apart(
    observation: Observation,
    *,
    request_id: str | None,
    parameters: Mapping[str, Any] | None = None,
    runtime: Mapping[str, Any] | None = None,
) -> tuple[bytes, str]:
    """The action request for `observation` as msgpack, without its frames, colour or depth
    (they travel in shared memory), and its content type: everything else as `encode_request`
    writes it."""
    payload = request_payload(
        observation,
        encoding="raw",  # the frames themselves (no copy), taken out below
        wire="msgpack",
        request_id=request_id,
        parameters=parameters,
        runtime=runtime,
    )
    observation_block = payload["input"]["observation"]
    observation_block["images"] = {}
    observation_block.pop("depth", None)
    return dumps(payload, "msgpack"), CONTENT_TYPES["msgpack"]


def with_frames(payload: Any, frames: SharedFrames) -> Any:
    """The server's side of `encode_request_apart`: `payload` (the parsed document) with the
    `frames` put back as its images and depth, where the decoder reads them (no depth key when
    there is none, as over HTTP)."""
    if isinstance(payload, dict) and isinstance(payload.get("input"), dict):
        observation = payload["input"].get("observation")
        if isinstance(observation, dict):
            observation["images"] = dict(frames.images)
            if frames.depth:
                observation["depth"] = dict(frames.depth)
    return payload

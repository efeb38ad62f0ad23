"""The transport-free half of the clients: encode a request, read its reply.

`ActionClient` and `AsyncActionClient` differ only in how they wait for the transport; all
encoding, timing, id checking and error mapping lives here once.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vla_client.client.result import ActionResult, Timings
from vla_client.codecs import Encoding, frame_digest
from vla_client.errors import CodecError, ProtocolError
from vla_client.observation import Observation
from vla_client.protocol import (
    CONTENT_TYPES,
    MSGPACK_CONTENT_TYPE,
    Wire,
    dumps,
    loads,
    new_request_id,
    read_actions,
    wire_for_content_type,
)
from vla_client.protocol.request import build_request
from vla_client.transports.base import Reply
from vla_client.transports.http import raise_for_status


@dataclass(frozen=True)
class ClientOptions:
    """How a client encodes: image encoding, wire format and JPEG quality."""

    encoding: Encoding = "png"
    wire: Wire = "json"
    jpeg_quality: int = 90

    def __post_init__(self) -> None:
        if self.encoding not in ("png", "jpeg", "raw", "pixels"):
            raise ValueError(f"encoding must be png, jpeg, raw or pixels, got {self.encoding!r}")
        if self.wire not in CONTENT_TYPES:
            raise ValueError(f"wire must be json or msgpack, got {self.wire!r}")


@dataclass(frozen=True)
class PreparedRequest:
    """An encoded request, ready for any transport."""

    body: bytes
    content_type: str
    accept: str
    request_id: str
    encode_ms: float


def prepare(
    observation: Observation,
    options: ClientOptions,
    parameters: Mapping[str, Any],
    runtime: Mapping[str, Any] | None,
) -> PreparedRequest:
    """Encode `observation` with `options`; the request gets a fresh id."""
    if not isinstance(observation, Observation):
        raise TypeError(f"infer() takes an Observation, got {type(observation).__name__}")
    start = time.perf_counter()
    request_id = new_request_id()
    request = build_request(
        observation,
        encoding=options.encoding,
        wire=options.wire,
        request_id=request_id,
        parameters=parameters,
        runtime=runtime,
        jpeg_quality=options.jpeg_quality,
    )
    body = dumps(request.to_payload(), options.wire)
    content_type = CONTENT_TYPES[options.wire]
    return PreparedRequest(
        body=body,
        content_type=content_type,
        accept=content_type if options.wire == "msgpack" else "application/json",
        request_id=request_id,
        encode_ms=(time.perf_counter() - start) * 1000,
    )


def finish(prepared: PreparedRequest, reply: Reply, round_trip_ms: float) -> ActionResult:
    """Read `reply` into an `ActionResult`; raises `ServerError` or `ProtocolError`."""
    raise_for_status(reply)
    start = time.perf_counter()
    try:
        wire = wire_for_content_type(reply.content_type or MSGPACK_CONTENT_TYPE)
        document = loads(reply.content, wire)
    except CodecError as exc:
        raise ProtocolError(f"cannot read the server's reply: {exc}") from None
    actions, request_id = read_actions(document)
    if request_id is not None and request_id != prepared.request_id:
        raise ProtocolError(
            f"reply is for request {request_id!r}, not the one sent ({prepared.request_id!r})"
        )
    decode_ms = (time.perf_counter() - start) * 1000
    server_timings = document.get("timings") or {}
    return ActionResult(
        actions=actions,
        request_id=request_id or prepared.request_id,
        timings=Timings(
            encode_ms=prepared.encode_ms,
            round_trip_ms=round_trip_ms,
            decode_ms=decode_ms,
            bytes_sent=len(prepared.body),
            bytes_received=len(reply.content),
            server={k: float(v) for k, v in server_timings.items() if isinstance(v, int | float)},
        ),
        raw=document,
        digests=document.get("digests"),
    )


def runtime_options(
    runtime: Mapping[str, Any] | None, return_digest: bool
) -> dict[str, Any] | None:
    """Merge the `return_digest` shortcut into the runtime block."""
    if not return_digest:
        return dict(runtime) if runtime else None
    return {**(runtime or {}), "return_digest": True}


def mismatched_cameras(observation: Observation, result: ActionResult) -> list[str]:
    """Cameras whose decoded pixels on the server differ from what was sent (needs digests)."""
    if result.digests is None:
        raise ProtocolError("the reply carries no digests; send with return_digest=True")
    return [
        name
        for name, frame in observation.images.items()
        if result.digests.get(name) != frame_digest(frame)
    ]

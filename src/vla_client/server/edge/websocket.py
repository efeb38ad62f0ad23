"""The websocket edge of the server: SGLang's ``/v1/actions/realtime`` and openpi's
``/openpi/policy`` (also served at ``/``, where openpi's client connects by default).

On connect the server sends its metadata as one binary msgpack frame, then answers each binary
msgpack frame with one, in order, on the same connection. Each frame goes through the same
`Pipeline` as an HTTP request; the realtime reply is the envelope, the openpi reply the raw
dict with ``actions``. Each carries ``server_timing.infer_ms`` (checking, inference and building
the reply) and, from the second on, ``prev_total_ms`` (the previous cycle, from waiting for its
request to sending its reply).

Any failure, a bad request included, ends the connection: the server sends the message (never
a traceback; that goes to the log) and closes with code 4000 + the HTTP status the failure
would have over HTTP (see `vla_client.protocol.status`). On realtime the message is an
``{"error", "status", "retry_after"}`` map; on openpi it is a text frame, as openpi's server
sends, which is what makes openpi's own client raise instead of taking the error for a reply.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import FastAPI, WebSocket, WebSocketDisconnect

from vla_client.errors import CodecError, PayloadTooLargeError
from vla_client.protocol import (
    ENDPOINT_PATHS,
    MSGPACK_CONTENT_TYPE,
    OPENPI_ROOT_PATH,
    ErrorStatus,
    dumps,
)
from vla_client.server.engine.pipeline import Pipeline, ReplyForm, failure

log = logging.getLogger("vla_client.server")


def register_websocket_routes(app: FastAPI, pipeline: Pipeline) -> None:
    """Serve the realtime and openpi websockets of `pipeline` on `app`."""

    async def realtime(websocket: WebSocket) -> None:
        await serve_connection(websocket, pipeline, "envelope", openpi=False)

    async def openpi(websocket: WebSocket) -> None:
        await serve_connection(websocket, pipeline, "raw", openpi=True)

    app.add_api_websocket_route(ENDPOINT_PATHS["realtime"], realtime)
    for path in (ENDPOINT_PATHS["openpi"], OPENPI_ROOT_PATH):
        app.add_api_websocket_route(path, openpi)


async def serve_connection(
    websocket: WebSocket, pipeline: Pipeline, form: ReplyForm, *, openpi: bool
) -> None:
    """The connection loop: metadata first, then one `form` reply per request until either side
    stops. On `openpi`'s endpoint requests are read in the server's openpi layout and a failure
    is a text frame; on realtime it is an error map."""
    await websocket.accept()
    request_id: str | None = None
    try:
        await websocket.send_bytes(pipeline.handshake)
        previous_ms: float | None = None
        while True:
            cycle_start = time.perf_counter()
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            started = time.perf_counter()
            frame = message.get("bytes")
            if frame is None:
                raise CodecError("frames must be binary msgpack, got a text frame")
            limit = pipeline.config.max_ws_message_bytes
            if len(frame) > limit:
                raise PayloadTooLargeError(f"{len(frame)}-byte frame, over the limit of {limit}")
            decoded = await pipeline.decode(frame, MSGPACK_CONTENT_TYPE, openpi=openpi)
            request_id = decoded.request_id
            answer_start = time.perf_counter()
            reply = await pipeline.answer(decoded, form=form, started=started)
            server_timing: dict[str, Any] = {
                "infer_ms": (time.perf_counter() - answer_start) * 1000
            }
            if previous_ms is not None:
                server_timing["prev_total_ms"] = previous_ms
            reply["server_timing"] = server_timing
            await websocket.send_bytes(dumps(reply, "msgpack"))
            pipeline.metrics.count(websocket.scope["path"], 200)
            previous_ms = (time.perf_counter() - cycle_start) * 1000
    except WebSocketDisconnect:
        return
    except Exception as exc:  # every failure ends the connection with a message, never a crash
        status = failure(
            exc,
            request_id,
            pipeline.failures,
            send_policy_errors=pipeline.config.send_policy_errors,
        )
        pipeline.metrics.count(websocket.scope["path"], status.status)
        await _fail(websocket, status, text=openpi)


async def _fail(websocket: WebSocket, status: ErrorStatus, *, text: bool) -> None:
    try:
        if text:
            await websocket.send_text(status.detail)
        else:
            frame = {"error": status.detail, "status": status.status}
            if status.retry_after is not None:
                frame["retry_after"] = status.retry_after
            await websocket.send_bytes(dumps(frame, "msgpack"))
        await websocket.close(status.close_code, status.close_reason)
    except (WebSocketDisconnect, RuntimeError, OSError):
        log.debug("client left before the error reached it")

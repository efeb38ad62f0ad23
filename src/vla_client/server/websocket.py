"""Websocket routes: SGLang's ``/v1/actions/realtime`` and openpi's ``/openpi/policy``.

Both follow contract section 5: on connect the server sends its metadata as one binary msgpack
frame, then answers each binary msgpack frame with one, in order, on the same connection. A
request goes through the HTTP route's steps (`decode_payload`, the same checks, the same runner,
so inference never blocks the event loop). The realtime reply is the envelope; the openpi
reply is the raw dict with ``actions``. Each carries ``server_timing.infer_ms`` (inference plus
building the reply) and, from the second on, ``prev_total_ms`` (the previous cycle, from
waiting for its request to sending its reply).

Any failure, a bad request included, ends the connection: the server sends the message (never
a traceback; that goes to the log) and closes with 1011. On realtime the message is a
``{"error": ...}`` map, as SGLang sends; on openpi it is a text frame, as openpi's server sends,
which is what makes openpi's own client raise instead of handing the error back as a reply.
openpi's client connects to ``/`` unless given a path, so ``/`` serves the openpi protocol too.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, WebSocket, WebSocketDisconnect
from starlette.concurrency import run_in_threadpool

from vla_client.errors import InferenceError, PayloadTooLargeError, VLAClientError
from vla_client.protocol import DecodedRequest, decode_payload, dumps, loads
from vla_client.server.config import ServerConfig
from vla_client.server.inference import Runner
from vla_client.server.policy import Policy
from vla_client.server.steps import infer_with_timeout, policy_input, reply_document

log = logging.getLogger("vla_client.server")

REALTIME_PATH = "/v1/actions/realtime"
OPENPI_PATHS = ("/openpi/policy", "/")
INTERNAL_ERROR = 1011

Answer = Callable[[bytes], Awaitable[dict[str, Any]]]


def register_websocket_routes(
    app: FastAPI, policy: Policy, config: ServerConfig, runner: Runner, metadata: dict[str, Any]
) -> None:
    """Serve both websockets on `app`, and say so in `metadata` (the dict GET metadata returns)."""
    metadata["capabilities"].update(realtime_websocket=True, openpi_websocket=True)
    handshake = dumps(metadata, "msgpack")

    def answerer(form: Literal["envelope", "raw"]) -> Answer:
        async def answer(frame: bytes) -> dict[str, Any]:
            start = time.perf_counter()
            limit = config.max_ws_message_bytes
            if len(frame) > limit:
                raise PayloadTooLargeError(f"{len(frame)}-byte frame, over the limit of {limit}")
            decoded = await run_in_threadpool(_decode_frame, frame, config)
            preprocess_ms = (time.perf_counter() - start) * 1000
            observation = policy_input(decoded, policy)
            infer_start = time.perf_counter()
            actions, stage_timings = await infer_with_timeout(
                runner, observation, config.infer_timeout_s
            )
            post_start = time.perf_counter()
            runtime = decoded.runtime.model_copy(update={"response_format": form})
            reply = await run_in_threadpool(
                reply_document,
                dataclasses.replace(decoded, runtime=runtime),
                actions,
                config.model_name,
                policy,
            )
            end = time.perf_counter()
            if decoded.runtime.return_timing:
                reply["timings"] = {
                    "preprocess_ms": preprocess_ms,
                    **stage_timings,
                    "postprocess_ms": (end - post_start) * 1000,
                    "total_ms": (end - start) * 1000,
                }
            reply["server_timing"] = {"infer_ms": (end - infer_start) * 1000}
            return reply

        return answer

    realtime = answerer("envelope")
    openpi = answerer("raw")

    async def realtime_route(websocket: WebSocket) -> None:
        await _serve(websocket, handshake, realtime, text_errors=False)

    async def openpi_route(websocket: WebSocket) -> None:
        await _serve(websocket, handshake, openpi, text_errors=True)

    app.add_api_websocket_route(REALTIME_PATH, realtime_route)
    for path in OPENPI_PATHS:
        app.add_api_websocket_route(path, openpi_route)


def _decode_frame(frame: bytes, config: ServerConfig) -> DecodedRequest:
    return decode_payload(loads(frame, "msgpack"), "msgpack", limits=config.limits)


async def _serve(
    websocket: WebSocket, handshake: bytes, answer: Answer, *, text_errors: bool
) -> None:
    """The connection loop: metadata first, then one reply per request until either side stops."""
    await websocket.accept()
    try:
        await websocket.send_bytes(handshake)
        previous_ms: float | None = None
        while True:
            cycle_start = time.perf_counter()
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            frame = message.get("bytes")
            if frame is None:
                raise _BadFrame("frames must be binary msgpack, got a text frame")
            reply = await answer(frame)
            if previous_ms is not None:
                reply["server_timing"]["prev_total_ms"] = previous_ms
            await websocket.send_bytes(dumps(reply, "msgpack"))
            previous_ms = (time.perf_counter() - cycle_start) * 1000
    except WebSocketDisconnect:
        return
    except Exception as exc:  # every failure ends the connection with a message, never a crash
        await _fail(websocket, _error_message(exc), text_errors)


class _BadFrame(VLAClientError):
    """A frame the websocket protocol does not allow."""


def _error_message(exc: Exception) -> str:
    if isinstance(exc, HTTPException | InferenceError):
        log.info("websocket request refused: %s", exc.detail)
        return str(exc.detail)
    if isinstance(exc, VLAClientError):
        log.info("websocket request refused: %s", exc)
        return str(exc)
    log.error("websocket request failed", exc_info=exc)
    return f"internal server error ({type(exc).__name__})"


async def _fail(websocket: WebSocket, message: str, text: bool) -> None:
    try:
        if text:
            await websocket.send_text(message)
        else:
            await websocket.send_bytes(dumps({"error": message}, "msgpack"))
        await websocket.close(INTERNAL_ERROR, "Internal server error")
    except (WebSocketDisconnect, RuntimeError, OSError):
        log.debug("client left before the error reached it")

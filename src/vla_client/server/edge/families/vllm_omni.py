"""vLLM-Omni's robot websocket, served: ``/v1/realtime/robot/openpi`` on the server's own port.

What vLLM-Omni's clients (openpi's ``WebsocketClientPolicy``, vla-client's own) expect of it
(`vla_client.protocol.families.vllm_omni` describes the messages):

- on connect, its ``PolicyServerConfig`` as one msgpack frame, made from the policy's spec:
  ``action_horizon``, ``image_resolution`` (the policy's image size, when it announces one),
  ``needs_session_id`` false, and ``action_keys`` when the server was given an action split;
- each binary frame an observation map: ``images`` (a list, one frame per camera), ``state``,
  ``prompt``. The frames take the policy's camera names in order (``image_0``, ``image_1``, ...
  for a policy that takes any names), and the observation goes through the server's one
  pipeline (`vla_client.server.edge.families.answer`). The answer is the chunk, ``[H, D]``
  float32, or with an action split a map of ``(1, H, D)`` per-key arrays;
- ``{"endpoint": "reset"}`` answers ``{"status": "reset successful"}`` (the policy keeps no
  session between requests, so there is nothing to end);
- a request the server cannot serve answers ``{"type": "error", "message": ...}`` and the
  connection stays open, as vLLM-Omni's does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, WebSocket, WebSocketDisconnect

from vla_client.errors import CodecError, PayloadTooLargeError
from vla_client.protocol import dumps, loads
from vla_client.protocol.endpoints import ENDPOINT_PATHS
from vla_client.protocol.families.vllm_omni import RESET_ANSWER
from vla_client.server.config import ProtocolSettings
from vla_client.server.edge.families.answer import (
    per_key_actions,
    run_policy,
    split_columns,
    text_task,
)
from vla_client.server.engine.pipeline import Pipeline, failure
from vla_client.server.policy import PolicySpec

PATH = ENDPOINT_PATHS["vllm_omni"]


def check(spec: PolicySpec, settings: ProtocolSettings) -> None:
    """`ValueError` for an action split that does not cut the policy's actions."""
    if settings.action_split is not None:
        split_columns(settings.action_split, spec.action_dim, "action")


def config_document(spec: PolicySpec, settings: ProtocolSettings) -> dict[str, Any]:
    """The ``PolicyServerConfig`` every connection gets first."""
    document: dict[str, Any] = {"action_horizon": spec.action_horizon, "needs_session_id": False}
    if spec.image_size is not None:
        document["image_resolution"] = list(spec.image_size)
    if settings.action_split is not None:
        document["action_keys"] = list(settings.action_split)
    return document


def camera_names(spec: PolicySpec, count: int) -> tuple[str, ...]:
    """The names the `count` frames of a request take: the policy's, in order; `CodecError`
    when it takes another number of cameras."""
    if not spec.camera_names:
        return tuple(f"image_{index}" for index in range(count))
    if count != len(spec.camera_names):
        raise CodecError(
            f"images: this policy takes {len(spec.camera_names)} frames, in the order "
            f"{list(spec.camera_names)}; got {count}"
        )
    return spec.camera_names


def install(app: FastAPI, pipeline: Pipeline, settings: ProtocolSettings) -> None:
    """Serve vLLM-Omni's robot websocket of `pipeline` on `app`."""
    handshake = dumps(config_document(pipeline.policy.spec, settings), "msgpack")
    columns = None
    if settings.action_split is not None:
        columns = split_columns(settings.action_split, pipeline.policy.spec.action_dim, "action")

    async def robot(websocket: WebSocket) -> None:
        await websocket.accept()
        try:
            await websocket.send_bytes(handshake)
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                answer, status = await _answer(pipeline, message.get("bytes"), columns)
                await websocket.send_bytes(dumps(answer, "msgpack"))
                pipeline.metrics.count(PATH, status)
        except WebSocketDisconnect:
            return

    app.add_api_websocket_route(PATH, robot)


async def _answer(
    pipeline: Pipeline, frame: bytes | None, columns: Mapping[str, slice] | None
) -> tuple[Any, int]:
    """The answer to one frame and its status: the actions, the reset's, or an error map."""
    started = time.perf_counter()
    try:
        if frame is None:
            raise CodecError("frames must be binary msgpack, got a text frame")
        limit = pipeline.config.max_ws_message_bytes
        if len(frame) > limit:
            raise PayloadTooLargeError(f"{len(frame)}-byte frame, over the limit of {limit}")
        request = loads(frame, "msgpack")
        if not isinstance(request, dict):
            raise CodecError(f"a request must be a msgpack map, got {type(request).__name__}")
        if request.get("endpoint") == "reset":
            return {"status": RESET_ANSWER}, 200
        images = request.get("images")
        if not isinstance(images, list) or not images:
            raise CodecError("images must be a list of frames, one per camera")
        names = camera_names(pipeline.policy.spec, len(images))
        state = request.get("state")
        task = text_task(request.get("prompt", ""), "prompt")
        chunk = await run_policy(
            pipeline, dict(zip(names, images, strict=True)), state, task, started=started
        )
    except Exception as exc:  # every failure is an error frame; the connection stays open
        status = failure(exc, None, pipeline.failures)
        return {"type": "error", "message": status.detail}, status.status
    if columns is None:
        return chunk, 200
    return per_key_actions(chunk, columns), 200

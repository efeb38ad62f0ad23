"""RoboArena's policy server, served: its websocket at ``/``, where RoboArena's client connects.

What RoboArena's clients (its ``WebsocketClientPolicy``, vla-client's own) expect of it
(`vla_client.protocol.families.roboarena` describes the messages):

- on connect, its ``PolicyServerConfig`` as one msgpack frame, made from the policy's spec
  (`arena_cameras`): the cameras to send, ``image_resolution`` (the policy's image size, or
  none: frames as they are), no stereo camera, no session id, ``joint_position`` actions;
- each binary frame a map: ``endpoint: "reset"`` is answered with the text frame ``reset
  successful``; anything else (``endpoint: "infer"``, or no endpoint, as RoboArena's client
  sent before it named one) is the evaluator's observation: ``observation/<camera>`` frames,
  ``observation/joint_position`` (7) and ``observation/gripper_position`` (1) joined into the
  policy's 8-value state, ``prompt``. It goes through the server's one pipeline
  (`vla_client.server.edge.families.answer`) and the answer is the ``(N, 8)`` chunk;
- a failure is answered with its message as a text frame and the connection is closed (with
  the close code of the server's other websockets, 4000 + the HTTP status), as RoboArena's
  server answers with its traceback and closes.

openpi's websocket, which the server also serves at ``/``, stays at ``/openpi/policy``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from fastapi import FastAPI, WebSocket, WebSocketDisconnect

from vla_client.errors import CodecError, PayloadTooLargeError
from vla_client.protocol import dumps, loads
from vla_client.protocol.families.roboarena import (
    ACTION_DIM,
    EXTERIOR,
    RESET_ANSWER,
    STATE_DIM,
    WRIST,
)
from vla_client.server.config import ProtocolSettings
from vla_client.server.edge.families.answer import run_policy, text_task
from vla_client.server.engine.pipeline import Pipeline, failure
from vla_client.server.policy import PolicySpec

PATH = "/"
ARENA_CAMERAS = (*EXTERIOR, WRIST)


def arena_cameras(spec: PolicySpec) -> dict[str, str]:
    """RoboArena's camera -> the policy's camera it is, in the config's order.

    A policy that takes any names gets RoboArena's (one exterior camera and the wrist's, its
    defaults); one whose cameras (or their aliases) are RoboArena's gets those; any other is
    paired in order: one camera is the exterior, two the exterior and the wrist, three both
    exteriors and the wrist. `ValueError` for more cameras than RoboArena has."""
    names = spec.camera_names
    if not names:
        return {EXTERIOR[0]: EXTERIOR[0], WRIST: WRIST}
    named = _by_name(spec)
    return named if named is not None else _in_order(names)


def _by_name(spec: PolicySpec) -> dict[str, str] | None:
    """RoboArena's cameras the policy's cameras are by name or alias, if every one of them is."""
    names = spec.camera_names
    aliases = {alias: name for alias, name in spec.camera_aliases.items() if name in names}
    named = {name: name for name in names if name in ARENA_CAMERAS}
    named.update({alias: name for alias, name in aliases.items() if alias in ARENA_CAMERAS})
    if set(named.values()) != set(names):
        return None
    return {camera: named[camera] for camera in ARENA_CAMERAS if camera in named}


def _in_order(names: tuple[str, ...]) -> dict[str, str]:
    """The policy's `names` paired in order with the cameras RoboArena sends for that many."""
    order = {1: EXTERIOR[:1], 2: (EXTERIOR[0], WRIST), 3: ARENA_CAMERAS}.get(len(names))
    if order is None:
        raise ValueError(
            f"--protocol roboarena: RoboArena sends at most 3 cameras {list(ARENA_CAMERAS)}; "
            f"this policy takes {len(names)}: {list(names)}"
        )
    return dict(zip(order, names, strict=True))


def check(spec: PolicySpec, settings: ProtocolSettings) -> None:
    """`ValueError` for a policy RoboArena's messages cannot carry: other than (N, 8) actions,
    a state of other than 8 values, or more than 3 cameras."""
    if spec.action_dim != ACTION_DIM:
        raise ValueError(
            f"--protocol roboarena: RoboArena's actions are (N, {ACTION_DIM}), 7 joints then the "
            f"gripper; this policy's have {spec.action_dim} values (serve one of {ACTION_DIM}: "
            f"--action-dim {ACTION_DIM} for the reference policy)"
        )
    if spec.state_dim not in (None, STATE_DIM):
        raise ValueError(
            f"--protocol roboarena: RoboArena's state is {STATE_DIM} values (7 joints, then the "
            f"gripper); this policy takes {spec.state_dim}"
        )
    arena_cameras(spec)


def config_document(spec: PolicySpec) -> dict[str, Any]:
    """The ``PolicyServerConfig`` every connection gets first."""
    cameras = arena_cameras(spec)
    return {
        "image_resolution": None if spec.image_size is None else list(spec.image_size),
        "needs_wrist_camera": WRIST in cameras,
        "n_external_cameras": sum(camera in cameras for camera in EXTERIOR),
        "needs_stereo_camera": False,
        "needs_session_id": False,
        "action_space": "joint_position",
    }


def install(app: FastAPI, pipeline: Pipeline, settings: ProtocolSettings) -> None:
    """Serve RoboArena's websocket of `pipeline` on `app`, at ``/``."""
    spec = pipeline.policy.spec
    handshake = dumps(config_document(spec), "msgpack")
    cameras = arena_cameras(spec)

    async def arena(websocket: WebSocket) -> None:
        await websocket.accept()
        try:
            await websocket.send_bytes(handshake)
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                started = time.perf_counter()
                try:
                    answer = await _answer(pipeline, message.get("bytes"), cameras, started)
                except Exception as exc:  # the message as text, then the connection closes
                    status = failure(exc, None, pipeline.failures)
                    pipeline.metrics.count(PATH, status.status)
                    await websocket.send_text(status.detail)
                    await websocket.close(status.close_code, status.close_reason)
                    return
                if isinstance(answer, str):
                    await websocket.send_text(answer)
                else:
                    await websocket.send_bytes(dumps(answer, "msgpack"))
                pipeline.metrics.count(PATH, 200)
        except (WebSocketDisconnect, RuntimeError, OSError):  # the client left
            return

    app.add_api_websocket_route(PATH, arena)


async def _answer(
    pipeline: Pipeline, frame: bytes | None, cameras: dict[str, str], started: float
) -> np.ndarray | str:
    """The chunk for one observation frame, or the reset's text."""
    request = _request(frame, pipeline.config.max_ws_message_bytes)
    endpoint = request.get("endpoint", "infer")
    if endpoint == "reset":
        return RESET_ANSWER
    if endpoint != "infer":
        raise CodecError(f"endpoint must be infer or reset, got {endpoint!r}")
    images, state = _observation(request, cameras)
    task = text_task(request.get("prompt") or "", "prompt")
    return await run_policy(pipeline, images, state, task, started=started)


def _request(frame: bytes | None, limit: int) -> dict[str, Any]:
    """The msgpack map one binary `frame` of at most `limit` bytes carries."""
    if frame is None:
        raise CodecError("frames must be binary msgpack, got a text frame")
    if len(frame) > limit:
        raise PayloadTooLargeError(f"{len(frame)}-byte frame, over the limit of {limit}")
    request = loads(frame, "msgpack")
    if not isinstance(request, dict):
        raise CodecError(f"a request must be a msgpack map, got {type(request).__name__}")
    return request


def _observation(
    request: dict[str, Any], cameras: dict[str, str]
) -> tuple[dict[str, Any], np.ndarray]:
    """The policy's images (by its camera names) and its state: the joints, then the gripper."""
    missing = [f"observation/{c}" for c in cameras if f"observation/{c}" not in request]
    if missing:
        raise CodecError(f"this server's config asks for {missing}; the request lacks them")
    images = {name: request[f"observation/{camera}"] for camera, name in cameras.items()}
    parts = [request.get(f"observation/{key}") for key in ("joint_position", "gripper_position")]
    if any(part is None for part in parts):
        raise CodecError("observation/joint_position and observation/gripper_position are needed")
    return images, np.concatenate([np.ravel(np.asarray(part, dtype=np.float64)) for part in parts])

"""RoboArena's policy server, as messages: built and read here, carried by the websocket.

RoboArena (``roboarena/policy_server.py``) evaluates DROID policies over openpi's websocket
framing (binary msgpack frames, numpy arrays as openpi's ``__ndarray__`` maps), on any path:

- On connect the server sends its ``PolicyServerConfig``: ``image_resolution`` (``[height,
  width]`` the client resizes frames to; None: as they are), ``needs_wrist_camera``,
  ``n_external_cameras`` (0, 1 or 2), ``needs_stereo_camera``, ``needs_session_id`` and
  ``action_space`` (``joint_position`` or ``joint_velocity``).
- Each request is the observation as RoboArena's evaluator sends it, with the ``endpoint`` its
  server requires: ``observation/exterior_image_{1,2}_left`` and ``observation/wrist_image_left``
  (frames), ``observation/joint_position`` (7) and ``observation/gripper_position`` (1),
  ``prompt``, ``session_id`` when asked, ``endpoint: "infer"``. The answer is the action chunk,
  ``(N, 8)``: 7 joints in the action space, then the gripper.
- ``{"endpoint": "reset"}`` (with the session id when asked) is answered with the text frame
  ``reset successful``.
- A failure is answered with the traceback as a text frame, and the server closes the
  connection: the transport raises it as `ServerError`, and the next request reconnects.

The cameras are named as the server reads them, without the ``observation/`` prefix
(``exterior_image_1_left``, ``exterior_image_2_left``, ``wrist_image_left``): map the robot's to
them with ``camera_map``. Cameras beyond those it asks for are not sent. This module does no
I/O: `vla_client.client.dialect` drives it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vla_client.errors import ContractError, ProtocolError
from vla_client.observation import Observation
from vla_client.protocol.metadata_fields import MAX_METADATA_DIM
from vla_client.protocol.models import ActionMetadata

NAME = "RoboArena's policy server"
RESET_ANSWER = "reset successful"
TEXT_ANSWERS = frozenset({RESET_ANSWER})
"""The text frame that is an answer (to a reset); any other is the server's traceback."""
EXTERIOR = ("exterior_image_1_left", "exterior_image_2_left")
WRIST = "wrist_image_left"
STATE_DIM = 8
"""The state RoboArena's requests are cut from: 7 joint positions, then the gripper's."""
ACTION_DIM = 8
ACTION_SPACES = ("joint_position", "joint_velocity")


@dataclass(frozen=True)
class ArenaConfig:
    """What the server's ``PolicyServerConfig`` asks for: `cameras` (the frames to send, by
    the names above), `image_size` (``(height, width)``, None: frames as they are),
    `needs_session_id` and `action_space`. `document` is the config as sent."""

    cameras: tuple[str, ...]
    image_size: tuple[int, int] | None
    needs_session_id: bool
    action_space: str
    document: Mapping[str, Any]


def _flag(document: Mapping[str, Any], name: str, default: bool) -> bool:
    value = document.get(name, default)
    if not isinstance(value, bool):
        raise ProtocolError(f"RoboArena's {name} must be true or false, got {value!r}")
    return value


def read_config(document: Any) -> ArenaConfig:
    """The handshake's config as `ArenaConfig`, with RoboArena's defaults for what it leaves
    out; `ProtocolError` for a field in another form, and for stereo cameras, which
    vla-client's observations (one frame per camera) cannot give."""
    if not isinstance(document, Mapping):
        raise ProtocolError(f"RoboArena's config must be a map, got {type(document).__name__}")
    resolution = document.get("image_resolution", (224, 224))
    if resolution is not None and not _is_resolution(resolution):
        raise ProtocolError(
            f"RoboArena's image_resolution must be [height, width], got {resolution!r}"
        )
    exterior = document.get("n_external_cameras", 1)
    if exterior not in (0, 1, 2) or isinstance(exterior, bool):
        raise ProtocolError(f"RoboArena's n_external_cameras must be 0, 1 or 2, got {exterior!r}")
    if _flag(document, "needs_stereo_camera", False):
        raise ProtocolError("RoboArena's server asks for stereo cameras; vla-client sends one "
                            "frame per camera")  # fmt: skip
    space = document.get("action_space", "joint_position")
    if space not in ACTION_SPACES:
        raise ProtocolError(
            f"RoboArena's action_space must be one of {ACTION_SPACES}, got {space!r}"
        )
    wrist = (WRIST,) if _flag(document, "needs_wrist_camera", True) else ()
    return ArenaConfig(
        cameras=EXTERIOR[:exterior] + wrist,
        image_size=None if resolution is None else (resolution[0], resolution[1]),
        needs_session_id=_flag(document, "needs_session_id", False),
        action_space=space,
        document=document,
    )


def _is_resolution(resolution: Any) -> bool:
    """Whether `resolution` is ``[height, width]``, two sizes a server may announce."""
    return (
        isinstance(resolution, list | tuple) and len(resolution) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) and 0 < n <= MAX_METADATA_DIM
                for n in resolution)
    )  # fmt: skip


def metadata(config: ArenaConfig) -> ActionMetadata:
    """The config as the action API's metadata: the cameras, the image size frames are padded
    to, the 8-value state and action; the config itself is kept under ``roboarena``."""
    inputs: dict[str, Any] = {"image_keys": list(config.cameras), "state_dim": STATE_DIM}
    if config.image_size is not None:
        inputs.update(image_size=list(config.image_size), image_size_required=True)
    return ActionMetadata.model_validate(
        {
            "policy_family": "roboarena",
            "input": inputs,
            "output": {"action_dim": ACTION_DIM},
            "roboarena": dict(config.document),
        }
    )


def cameras(config: ArenaConfig) -> tuple[str, ...]:
    """The cameras the server asks for; the client sends no others."""
    return config.cameras


def request_document(
    observation: Observation, config: ArenaConfig, session_id: str
) -> dict[str, Any]:
    """The request for `observation` (cameras named and sized for the server), as RoboArena's
    evaluator builds it. `ContractError` for a camera it asks for that is missing, or a state
    that is not 7 joints and the gripper."""
    missing = [name for name in config.cameras if name not in observation.images]
    if missing:
        raise ContractError("cameras", list(config.cameras), sorted(observation.images))
    state = observation.state
    if state is None or len(state) != STATE_DIM:
        given = "none" if state is None else f"{len(state)} values"
        raise ContractError(
            "state", f"{STATE_DIM} values (7 joint positions, then the gripper)", given
        )
    document: dict[str, Any] = {
        f"observation/{name}": observation.images[name] for name in config.cameras
    }
    document["observation/joint_position"] = state[:7]
    document["observation/gripper_position"] = state[7:]
    document["prompt"] = observation.task
    if config.needs_session_id:
        document["session_id"] = session_id
    document["endpoint"] = "infer"
    return document


def reset_document(config: ArenaConfig, session_id: str) -> dict[str, Any]:
    """The reset request, with the session id when the server asks for one."""
    document: dict[str, Any] = {"endpoint": "reset"}
    if config.needs_session_id:
        document["session_id"] = session_id
    return document


def read_answer(document: Any) -> Any:
    """`document` itself: RoboArena's errors are text frames, raised by the transport."""
    return document


def read_actions(answer: Any, config: ArenaConfig) -> tuple[np.ndarray, None]:
    """The answer as a float32 ``[N, 8]`` chunk (an openpi-style ``{"actions": chunk}`` map is
    read too); `ProtocolError` for anything else."""
    chunk = answer.get("actions") if isinstance(answer, Mapping) else answer
    if not (
        isinstance(chunk, np.ndarray) and chunk.ndim == 2 and chunk.shape[0] > 0
        and chunk.shape[1] == ACTION_DIM and chunk.dtype.kind in "fiu"
    ):  # fmt: skip
        shape = getattr(chunk, "shape", type(chunk).__name__)
        raise ProtocolError(f"RoboArena's action must be an (N, {ACTION_DIM}) array, got {shape}")
    return chunk.astype(np.float32), None  # a copy: the reply's arrays are read-only


def read_reset(answer: Any) -> None:
    """`ProtocolError` unless `answer` is the text ``reset successful``."""
    if answer != RESET_ANSWER:
        raise ProtocolError(f"RoboArena answered the reset with {answer!r}, not {RESET_ANSWER!r}")

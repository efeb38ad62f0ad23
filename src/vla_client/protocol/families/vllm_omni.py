"""vLLM-Omni's robot endpoint, as messages: built and read here, carried by the websocket.

vLLM-Omni serves robot policies (pi0/pi0.5, GR00T N1.7, Cosmos3, DreamZero, OpenVLA) at
``ws://host:port/v1/realtime/robot/openpi`` (its ``vllm_omni/entrypoints/openpi/``); a URL
ending in that path speaks this dialect (`vla_client.protocol.endpoints`). The framing is
openpi's: binary msgpack frames with numpy arrays as openpi's ``__ndarray__`` maps.

- On connect the server sends its ``PolicyServerConfig``: a map the loaded model fills in, so
  every key is optional. Read here: ``action_keys`` (the names of the per-key actions),
  ``action_horizon``, ``image_resolution`` (``[height, width]``) and ``needs_session_id``.
- Each request is one observation map; the server hands it as it came to the model's pipeline,
  which reads the frames from ``images`` (a list, one frame per camera), the state from
  ``state`` and the task from ``prompt`` (the engine's prompt too). The server keys its
  session by ``session_id`` (``"default"`` when none is sent).
- The reply is the actions: one array, or a map of per-key arrays (``(H, D)``, or
  ``(1, H, D)`` with the batch axis).
- ``{"endpoint": "reset"}`` ends the session; the server answers ``{"status": "reset
  successful"}``.
- A request it cannot serve is answered ``{"type": "error", "message": ..., "code": ...}``
  (``code`` only from some servers); the server keeps the connection open, but as its replies
  carry no request id the client opens a new one for the next request
  (`vla_client.client.dialect`).
- Its main branch (late 2026) also closes a connection idle for 30 s (a normal close, code
  1000; the transport opens a new one for the next request), and a server with no policy loaded
  sends, in place of its config, the text frame ``{"type": "error", "error": ..., "code":
  "unsupported"}`` (raised by the transport as `ServerErrorFrame`).

This module does no I/O: `read_config` reads the handshake into `OmniConfig` (and `metadata`
from it the `ActionMetadata` the client fits frames to), `request_document` builds a request,
`reset_document` the reset, `read_answer` raises an error frame as `ServerErrorFrame`,
`read_actions` flattens the reply into one ``[H, D]`` chunk in the announced key order and
`read_reset` checks the reset's answer. `vla_client.client.dialect` drives them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vla_client.errors import ProtocolError, ServerErrorFrame
from vla_client.observation import Observation
from vla_client.protocol.metadata_fields import MAX_METADATA_CAMERAS, MAX_METADATA_DIM
from vla_client.protocol.models import ActionMetadata

NAME = "vLLM-Omni's robot endpoint"
TEXT_ANSWERS: frozenset[str] = frozenset()
"""vLLM-Omni answers in msgpack only: a text frame would be an error."""
RESET_ANSWER = "reset successful"


@dataclass(frozen=True)
class OmniConfig:
    """What the server's ``PolicyServerConfig`` announces, each None where it says nothing.

    `action_keys` name the per-key actions in the order their chunk is joined, `action_horizon`
    is the chunk's length, `image_size` the ``(height, width)`` its frames are fitted to, and
    `needs_session_id` says whether each request carries the client's session id. `document`
    is the config as sent, for people to read.
    """

    action_keys: tuple[str, ...] | None
    action_horizon: int | None
    image_size: tuple[int, int] | None
    needs_session_id: bool
    document: Mapping[str, Any]


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_METADATA_DIM


def read_config(document: Any) -> OmniConfig:
    """The handshake's ``PolicyServerConfig`` as `OmniConfig`; `ProtocolError` for a config
    that is not a map or a field it reads in another form."""
    if not isinstance(document, Mapping):
        raise ProtocolError(f"vLLM-Omni's config must be a map, got {type(document).__name__}")
    keys = _action_keys(document.get("action_keys"))
    horizon = document.get("action_horizon")
    if horizon is not None and not _count(horizon):
        raise ProtocolError(f"vLLM-Omni's action_horizon must be a count, got {horizon!r}")
    image_size = _image_size(document.get("image_resolution"))
    session = document.get("needs_session_id", False)
    if not isinstance(session, bool):
        raise ProtocolError(f"vLLM-Omni's needs_session_id must be true or false, got {session!r}")
    return OmniConfig(
        action_keys=keys,
        action_horizon=horizon,
        image_size=image_size,
        needs_session_id=session,
        document=document,
    )


def _action_keys(keys: Any) -> tuple[str, ...] | None:
    """The config's ``action_keys`` (None when absent): distinct names, as many as a server
    may announce."""
    if keys is None:
        return None
    if not _are_action_keys(keys):
        raise ProtocolError(f"vLLM-Omni's action_keys must be distinct names, got {keys!r}")
    return tuple(keys)


def _image_size(resolution: Any) -> tuple[int, int] | None:
    """The config's ``image_resolution`` as (height, width), None when absent."""
    if resolution is None:
        return None
    if not _is_resolution(resolution):
        raise ProtocolError(
            f"vLLM-Omni's image_resolution must be [height, width], got {resolution!r}"
        )
    return resolution[0], resolution[1]


def _are_action_keys(keys: Any) -> bool:
    """Whether `keys` is a list of distinct names, as many as a server may announce."""
    if not isinstance(keys, list | tuple) or not 0 < len(keys) <= MAX_METADATA_CAMERAS:
        return False
    return all(isinstance(k, str) and k for k in keys) and len(set(keys)) == len(keys)


def _is_resolution(resolution: Any) -> bool:
    """Whether `resolution` is ``[height, width]``, two counts."""
    return (
        isinstance(resolution, list | tuple) and len(resolution) == 2
        and all(_count(side) for side in resolution)
    )  # fmt: skip


def metadata(config: OmniConfig) -> ActionMetadata:
    """The config as the action API's metadata: the image size frames are padded to (as
    openpi's clients resize with padding) and the horizon; the config itself is kept under
    ``vllm_omni``."""
    inputs: dict[str, Any] = {}
    if config.image_size is not None:
        inputs = {"image_size": list(config.image_size), "image_size_required": True}
    outputs = {} if config.action_horizon is None else {"action_horizon": config.action_horizon}
    return ActionMetadata.model_validate(
        {
            "policy_family": "vllm_omni",
            "input": inputs,
            "output": outputs,
            "vllm_omni": dict(config.document),
        }
    )


def cameras(config: OmniConfig) -> None:
    """None: vLLM-Omni's pipelines read every camera sent."""
    return None


def request_document(
    observation: Observation, config: OmniConfig, session_id: str
) -> dict[str, Any]:
    """The request for `observation`, whose frames are already fitted: the frames under
    ``images`` in the observation's camera order, the state as float32 under ``state``, the
    task under ``prompt``, and `session_id` when the config asks for one."""
    document: dict[str, Any] = {"images": list(observation.images.values())}
    if observation.state is not None:
        document["state"] = np.asarray(observation.state, dtype=np.float32)
    document["prompt"] = observation.task or ""
    if config.needs_session_id:
        document["session_id"] = session_id
    return document


def reset_document(config: OmniConfig, session_id: str) -> dict[str, Any]:
    """The reset request: the server ends the connection's session (the id says which)."""
    return {"endpoint": "reset", "session_id": session_id}


def read_answer(document: Any) -> Any:
    """`document` itself, unless it is an error frame: that is raised as `ServerErrorFrame`
    (status 500, as the server gives none) with the frame's ``code``."""
    if isinstance(document, Mapping) and document.get("type") == "error":
        code = document.get("code")
        raise ServerErrorFrame(
            500,
            str(document.get("message", "the server sent an error frame without a message")),
            code=None if code is None else str(code),
        )
    return document


def _chunk(name: str, value: Any, horizon: int | None) -> np.ndarray:
    """One reply array as float32 ``[H, D]``: a batch axis of 1 dropped, a vector one column."""
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "fiu":
        raise ProtocolError(f"vLLM-Omni's {name} is not a number array: {type(value).__name__}")
    array = value[0] if value.ndim == 3 and value.shape[0] == 1 else value
    array = array[:, np.newaxis] if array.ndim == 1 else array
    if array.ndim != 2 or not array.size or (horizon is not None and array.shape[0] != horizon):
        want = "[H, D]" if horizon is None else f"[{horizon}, D]"
        raise ProtocolError(f"vLLM-Omni's {name} must be {want} (or [1, H, D]), got {value.shape}")
    return array.astype(np.float32)  # a copy: the reply's arrays are read-only


def read_actions(answer: Any, config: OmniConfig) -> tuple[np.ndarray, dict[str, slice] | None]:
    """The reply as one float32 ``[H, D]`` chunk and, for per-key actions, the columns each
    key fills. Per-key actions are joined in the order of the config's ``action_keys`` (the
    reply's map order means nothing); `ProtocolError` for keys other than the announced ones,
    per-key actions from a server that announced no keys, or arrays of other horizons."""
    if not isinstance(answer, Mapping):
        return _chunk("actions", answer, config.action_horizon), None
    if config.action_keys is None:
        raise ProtocolError(
            f"vLLM-Omni answered per-key actions {sorted(map(str, answer))} but its config "
            "announced no action_keys to order them by"
        )
    if sorted(answer) != sorted(config.action_keys):
        raise ProtocolError(
            f"vLLM-Omni's actions are {sorted(answer)}, its config announced "
            f"{list(config.action_keys)}"
        )
    parts = [_chunk(f"action {key!r}", answer[key], config.action_horizon)
             for key in config.action_keys]  # fmt: skip
    if len({part.shape[0] for part in parts}) != 1:
        raise ProtocolError(
            f"vLLM-Omni's actions have different horizons: {[p.shape[0] for p in parts]}"
        )
    slices, start = {}, 0
    for key, part in zip(config.action_keys, parts, strict=True):
        slices[key] = slice(start, start + part.shape[1])
        start += part.shape[1]
    return np.concatenate(parts, axis=1), slices


def read_reset(answer: Any) -> None:
    """`ProtocolError` unless `answer` is the server's ``{"status": "reset successful"}``."""
    if not (isinstance(answer, Mapping) and answer.get("status") == RESET_ANSWER):
        raise ProtocolError(f"vLLM-Omni answered the reset with {answer!r}, not {RESET_ANSWER!r}")

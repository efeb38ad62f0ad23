"""NVIDIA Isaac GR00T's policy server, as messages: built and read here, carried elsewhere.

GR00T serves a policy over ZeroMQ request/reply (``tcp://host:5555``; its
``gr00t/policy/server_client.py``). Each request is one msgpack map ``{"endpoint", "data",
"api_token"}`` and gets one msgpack reply; arrays travel as ``{"__ndarray_class__": true,
"as_npy": <the bytes np.save writes>}``. Its endpoints:

- ``get_modality_config``: the policy's modalities, ``{"video", "state", "action", "language"}``,
  each with its ``modality_keys`` and ``delta_indices`` (how many time steps it takes);
- ``get_action`` with ``{"observation", "options"}``: the nested observation
  ``{"video": {camera: uint8 (1, T, H, W, 3)}, "state": {key: float32 (1, T, D)},
  "language": {key: [[task]]}}`` in, ``[actions, info]`` out, ``actions`` one float32
  ``(1, H, D)`` array per action key;
- ``reset`` with ``{"options"}``, ``ping`` and ``kill``;
- any failure answers ``{"error": message}`` (a wrong key: ``"Unauthorized: ..."``).

This module does no I/O: `message` builds a request, `read_answer` reads a reply (an error as
`ServerError`), `read_modality_config` reads the policy's description into `Gr00tConfig` (and
from it the `ActionMetadata` the client fits frames to), `observation_document` builds the
nested observation from an `Observation`, and `read_actions` joins the per-key actions into one
``[H, D]`` chunk in the order the config names them. `vla_client.transports.zmq` carries the
bytes.

GR00T's config names the state keys but not their sizes, so a flat state vector is split by a
declared ``{key: dim}`` (`check_state_split`), in the order the split names them; a vector of
one value per key needs none (it can be cut no other way).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard
from urllib.parse import urlsplit

import msgpack
import numpy as np

from vla_client.errors import ContractError, OptionFix, ProtocolError, ServerError
from vla_client.observation import Observation
from vla_client.protocol.metadata_fields import MAX_METADATA_CAMERAS, MAX_METADATA_DIM
from vla_client.protocol.models import ActionMetadata

GR00T_PORT = 5555
"""The port GR00T's server binds unless told otherwise."""
Call = Literal["ping", "get_action", "reset", "get_modality_config", "kill"]
MODALITIES = ("video", "state", "action", "language")
"""The modalities a GR00T config describes, each a ``{"modality_keys", "delta_indices"}``."""
POLICY_FAMILY = "gr00t"
"""The ``policy_family`` of a GR00T server's metadata as `Gr00tConfig.metadata` writes it."""
_NDARRAY = "__ndarray_class__"
MODALITY_CONFIG_CLASS = "__ModalityConfig_class__"
"""The marker of a ModalityConfig in GR00T's msgpack: ``{marker: true, "as_json": fields}``."""


def zmq_address(url: str) -> str:
    """The ``tcp://host:port`` to connect to for `url` (port 5555 when it names none).

    `ValueError` for another scheme, a path, or a port out of range: a ZeroMQ address has no
    path, and GR00T's server is one socket, not a set of routes.
    """
    parts = urlsplit(url)
    if parts.scheme != "tcp" or not parts.hostname:
        raise ValueError(f"GR00T's server is at tcp://host:port, got {url!r}")
    if parts.path not in ("", "/") or parts.query:
        raise ValueError(f"a tcp:// address has no path or query, got {url!r}")
    try:
        port = parts.port or GR00T_PORT
    except ValueError:
        raise ValueError(f"the port must be in 1..65535, got {url!r}") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"tcp://{host}:{port}"


def _pack_array(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        buffer = io.BytesIO()
        np.save(buffer, value, allow_pickle=False)
        return {_NDARRAY: True, "as_npy": buffer.getvalue()}
    raise TypeError(f"cannot send a value of type {type(value).__name__} to GR00T's server")


def _unpack_hook(value: dict[Any, Any]) -> Any:
    if value.get(_NDARRAY) is True:
        npy = value.get("as_npy")
        if not isinstance(npy, bytes):
            raise ProtocolError("an array in GR00T's reply has no as_npy bytes")
        return np.load(io.BytesIO(npy), allow_pickle=False)
    if value.get(MODALITY_CONFIG_CLASS) is True:  # a ModalityConfig dataclass, as its fields
        return value.get("as_json")
    return value


def packb(document: Any) -> bytes:
    """`document` as GR00T's msgpack, each ndarray as its ``np.save`` bytes."""
    packed: bytes = msgpack.packb(document, default=_pack_array, use_bin_type=True)
    return packed


def unpackb(data: bytes) -> Any:
    """A GR00T msgpack message, its arrays as ndarrays and its configs as plain maps;
    `ProtocolError` for bytes that are not one."""
    try:
        return msgpack.unpackb(data, object_hook=_unpack_hook, raw=False, strict_map_key=False)
    except ProtocolError:
        raise
    except Exception as exc:  # msgpack's and numpy's many ways to refuse bytes
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise ProtocolError(f"GR00T's reply is not a message it sends ({reason})") from None


def message(
    call: Call, data: Mapping[str, Any] | None = None, api_token: str | None = None
) -> bytes:
    """The request for `call`: ``data`` only for the calls that take it (as GR00T's own client
    sends them), ``api_token`` only with a key."""
    request: dict[str, Any] = {"endpoint": call}
    if data is not None:
        request["data"] = dict(data)
    if api_token:
        request["api_token"] = api_token
    return packb(request)


def read_answer(data: bytes) -> Any:
    """The document of a reply; its ``{"error": message}`` as `ServerError` (401 for a refused
    key, whose message GR00T starts with ``Unauthorized``; 500 for the rest, as the server says
    no more)."""
    if data == b"ERROR":  # what GR00T's own client takes for a server of another kind
        raise ServerError(500, "the server answered ERROR; is it GR00T's policy server?")
    answer = unpackb(data)
    if isinstance(answer, Mapping) and "error" in answer:
        detail = str(answer["error"])
        raise ServerError(401 if detail.startswith("Unauthorized") else 500, detail)
    return answer


@dataclass(frozen=True)
class Gr00tConfig:
    """What a GR00T policy reads and returns, from its ``get_modality_config``.

    `video_keys` are its cameras, `state_keys` its named state parts, `action_keys` the parts of
    its action, in the order its chunk is joined, `language_key` where the task goes. The steps
    are how many time steps each modality takes (``len(delta_indices)``): the action's is the
    chunk's horizon.
    """

    video_keys: tuple[str, ...]
    state_keys: tuple[str, ...]
    action_keys: tuple[str, ...]
    language_key: str
    video_steps: int
    state_steps: int
    action_horizon: int

    def metadata(self, state_split: Mapping[str, int] | None = None) -> ActionMetadata:
        """The config as the action API's metadata: the cameras to fit frames to, the state
        length a `state_split` for the config's state keys gives, and the chunk's horizon
        (GR00T announces no image size and no action sizes). The keys themselves are kept
        under ``gr00t``, for people to read."""
        fits = state_split is not None and sorted(state_split) == sorted(self.state_keys)
        state_dim = sum(state_split.values()) if state_split and fits else None
        return ActionMetadata.model_validate(
            {
                "policy_family": POLICY_FAMILY,
                "input": {"image_keys": list(self.video_keys), "state_dim": state_dim},
                "output": {"action_horizon": self.action_horizon},
                "gr00t": {
                    "state_keys": list(self.state_keys),
                    "action_keys": list(self.action_keys),
                    "language_key": self.language_key,
                },
            }
        )


def _modality(document: Mapping[str, Any], name: str) -> tuple[tuple[str, ...], int]:
    block = document.get(name)
    keys = block.get("modality_keys") if isinstance(block, Mapping) else None
    steps = block.get("delta_indices") if isinstance(block, Mapping) else None
    if not (_are_names(keys) and _are_indices(steps)):
        raise ProtocolError(
            f"GR00T's modality config {name!r} needs modality_keys (names) and delta_indices "
            f"(integers), got {block!r}"
        )
    if len(keys) > MAX_METADATA_CAMERAS or len(steps) > MAX_METADATA_DIM:
        raise ProtocolError(f"GR00T's modality config {name!r} is over the client's bounds")
    return tuple(keys), len(steps)


def _are_names(keys: object) -> TypeGuard[list[str]]:
    """Whether `keys` is a non-empty list of names."""
    return isinstance(keys, list) and bool(keys) and all(isinstance(k, str) and k for k in keys)


def _are_indices(steps: object) -> TypeGuard[list[int]]:
    """Whether `steps` is a non-empty list of integers."""
    return (
        isinstance(steps, list) and bool(steps)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in steps)
    )  # fmt: skip


def read_modality_config(document: Any) -> Gr00tConfig:
    """`get_modality_config`'s answer as `Gr00tConfig`; `ProtocolError` when a modality is
    missing or malformed, or the policy takes more than one task text."""
    if not isinstance(document, Mapping):
        raise ProtocolError(f"GR00T's modality config must be a map, got {type(document).__name__}")
    (video, video_steps), (state, state_steps), (action, horizon), (language, _) = (
        _modality(document, name) for name in MODALITIES
    )
    if len(language) != 1:
        raise ProtocolError(
            f"GR00T's policies take one language key, this one names {list(language)}"
        )
    return Gr00tConfig(video, state, action, language[0], video_steps, state_steps, horizon)


def check_state_split(split: Mapping[str, int] | None) -> dict[str, int] | None:
    """`split` (state key -> its length in the flat state vector) checked: `ValueError` unless
    it names each key once with a positive length."""
    if split is None:
        return None
    if not isinstance(split, Mapping) or not split:
        raise ValueError(f"state_split maps state keys to their lengths, got {split!r}")
    for key, dim in split.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"state_split keys are state key names, got {key!r}")
        if isinstance(dim, bool) or not isinstance(dim, int) or not 0 < dim <= MAX_METADATA_DIM:
            raise ValueError(f"state_split[{key!r}] must be a length in 1..{MAX_METADATA_DIM}, "
                             f"got {dim!r}")  # fmt: skip
    return dict(split)


def flat_state(parts: Mapping[str, Any]) -> tuple[np.ndarray, dict[str, int]]:
    """A state given as named parts (state key -> a vector of numbers) as the one vector an
    `Observation` holds and the `state_split` that cuts it back into them: pass the vector as
    ``Observation(state=...)`` and the split as ``ActionClient(state_split=...)``.
    `ValueError` for an empty map or a part that is not a non-empty 1-D vector of numbers."""
    if not isinstance(parts, Mapping) or not parts:
        raise ValueError(f"flat_state takes state key -> vector, got {parts!r}")
    vectors = {key: np.asarray(value) for key, value in parts.items()}
    for key, vector in vectors.items():
        if vector.ndim != 1 or not vector.size or vector.dtype.kind not in "fiu":
            raise ValueError(f"state part {key!r} must be a 1-D vector of numbers, got {vector!r}")
    split = check_state_split({key: int(vector.size) for key, vector in vectors.items()})
    assert split is not None  # parts is not empty
    return np.concatenate(list(vectors.values())), split


def _one_step(config: Gr00tConfig) -> None:
    for name, steps in (("video", config.video_steps), ("state", config.state_steps)):
        if steps != 1:
            raise ContractError(
                f"{name}.delta_indices",
                f"{steps} time steps of {name}",
                "one",
                "vla-client sends the latest frame and state only",
            )


class _Dim:
    """A length left for the user to fill in: ``DIM`` in ``--state-split arm=DIM`` and in
    ``state_split={'arm': DIM}``."""

    def __repr__(self) -> str:
        return "DIM"


def _state_parts(
    state: np.ndarray | None, config: Gr00tConfig, split: Mapping[str, int] | None
) -> dict[str, np.ndarray]:
    """The flat `state` cut into the config's named parts, float32 ``(1, 1, D)`` each. Without
    a `split`, a state of one value per key is cut so (no other cut exists, each key taking at
    least one value); any other length needs the split."""
    keys = config.state_keys
    if state is None:
        raise ContractError(
            "state.modality_keys", f"a state for {list(keys)}", "none",
            "give the observation the robot's state (Observation(state=...); "
            "on the command line, --state)",
        )  # fmt: skip
    if split is None and len(state) == len(keys):
        split = dict.fromkeys(keys, 1)
    if split is None:
        raise ContractError(
            "state.modality_keys", f"the state as {list(keys)}", f"a flat vector of {len(state)}",
            "GR00T announces the state keys but not their lengths",
            fix=OptionFix(
                "state_split", (dict.fromkeys(keys, _Dim()),),
                before=f"say how many of the {len(state)} values each key takes, in the "
                "vector's order: ",
            ),
        )  # fmt: skip
    if sorted(split) != sorted(keys):
        raise ContractError("state.modality_keys", sorted(keys), f"state_split for {sorted(split)}")
    if sum(split.values()) != len(state):
        raise ContractError(
            "state_split", f"{sum(split.values())} values ({split})", f"{len(state)} values"
        )
    parts, start = {}, 0
    for key, dim in split.items():
        parts[key] = state[start : start + dim].astype(np.float32).reshape(1, 1, dim)
        start += dim
    return parts


def observation_document(
    observation: Observation, config: Gr00tConfig, split: Mapping[str, int] | None
) -> dict[str, Any]:
    """GR00T's nested observation for `observation`, whose cameras are already named and sized
    for the server: each frame ``(1, 1, H, W, 3)``, the state cut by `split` into float32
    ``(1, 1, D)`` parts (GR00T refuses float64), the task under the language key as
    ``[[task]]``. `ContractError` for a state the config does not take as given."""
    _one_step(config)
    video = {key: frame[np.newaxis, np.newaxis] for key, frame in observation.images.items()}
    if config.state_keys:
        state = _state_parts(observation.state, config, split)
    elif observation.state is not None:
        raise ContractError("state.modality_keys", "no state", f"{len(observation.state)} values")
    else:
        state = {}
    return {
        "video": video,
        "state": state,
        "language": {config.language_key: [[observation.task or ""]]},
    }


def read_actions(answer: Any, config: Gr00tConfig) -> tuple[np.ndarray, dict[str, slice]]:
    """``get_action``'s ``[actions, info]`` as one float32 ``[H, D]`` chunk, its parts joined in
    the order of the config's action keys (a reply's map order means nothing), and the slice of
    the chunk's columns each key fills. `ProtocolError` for a reply without one ``(1, H, D)``
    array per announced key, of one horizon, or with keys the config does not name."""
    if not (
        isinstance(answer, list | tuple) and len(answer) == 2 and isinstance(answer[0], Mapping)
    ):
        raise ProtocolError("GR00T's get_action reply is not [actions, info]")
    actions = answer[0]
    unknown = sorted(set(actions) - set(config.action_keys))
    missing = [key for key in config.action_keys if key not in actions]
    if unknown or missing:
        raise ProtocolError(
            f"GR00T's actions are {sorted(actions)}, its config announced "
            f"{list(config.action_keys)}"
        )
    parts, slices, start = [], {}, 0
    for key in config.action_keys:
        part = actions[key]
        if not (
            isinstance(part, np.ndarray) and part.ndim == 3 and part.shape[0] == 1
            and part.shape[1] == config.action_horizon and part.dtype.kind in "fiu"
        ):  # fmt: skip
            shape = getattr(part, "shape", type(part).__name__)
            raise ProtocolError(
                f"GR00T's action {key!r} must be a (1, {config.action_horizon}, D) number array, "
                f"got {shape}"
            )
        parts.append(part[0].astype(np.float32, copy=False))
        slices[key] = slice(start, start + part.shape[2])
        start += part.shape[2]
    return np.concatenate(parts, axis=1), slices

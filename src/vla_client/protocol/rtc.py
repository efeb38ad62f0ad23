"""Real-time chunking (RTC) on the wire: what the robot sends, what a server echoes and announces.

RTC (Black et al. 2025, "Real-Time Execution of Action Chunking Flow Policies") lets a flow
policy continue the chunk the robot is executing instead of starting afresh: the server inpaints
the new chunk so that its first rows follow what the robot will still execute of the old one.
The robot sends three things with an observation:

- ``prefix_actions``: the rows of the current chunk not yet executed when the observation was
  taken (row 0 is the action for that tick), in robot units, ``[P, D]``;
- ``inference_delay_steps`` (d): how many of those rows the robot will have executed by the
  time the reply can be used, measured as actions consumed while earlier requests were in
  flight; the server keeps rows ``0..d-1`` equal to the prefix;
- ``execution_horizon`` (s): how many rows of each chunk the robot executes before asking
  again; guidance fades out over the prefix rows up to ``H - s``.

On the action API they travel as ``parameters.rtc = {prefix_actions, inference_delay_steps,
execution_horizon}`` (an extension SGLang does not know and drops silently), on openpi's
websocket as the observation keys ``rtc/prev_chunk``, ``rtc/inference_delay`` and
``rtc/execution_horizon`` (the names openpi forks use). A server that does RTC says so in its
metadata (``capabilities.rtc``) and echoes what it applied in each reply (a top-level ``rtc``
object), so a client can tell RTC done from RTC dropped.

NVIDIA Isaac GR00T takes the same request in its own terms (the previous chunk per action key
and ``rtc_*`` options, `vla_client.protocol.families.gr00t_rtc.rtc_request`) but announces and
echoes nothing, so RTC against it is the user's declaration
(`vla_client.protocol.declare_rtc`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vla_client.errors import CodecError, ProtocolError

CAPABILITY = "rtc"
"""The metadata's ``capabilities`` key a server announces RTC under, and the reply's echo key."""
PARAMETER = "rtc"
"""The ``parameters`` key of an action request that carries RTC."""
OPENPI_PREFIX_KEY = "rtc/prev_chunk"
OPENPI_DELAY_KEY = "rtc/inference_delay"
OPENPI_HORIZON_KEY = "rtc/execution_horizon"
OPENPI_KEYS = (OPENPI_PREFIX_KEY, OPENPI_DELAY_KEY, OPENPI_HORIZON_KEY)


@dataclass(frozen=True)
class RTCRequest:
    """The RTC part of one request: the prefix in robot units, the delay d and the horizon s.

    Built by the robot's executor and read back by a server (`read_rtc`); `ValueError` for a
    prefix that is not a finite ``[P, D]`` array with P >= 1, a delay below 0 or a horizon
    below 1.
    """

    prefix_actions: np.ndarray
    inference_delay_steps: int
    execution_horizon: int

    def __post_init__(self) -> None:
        prefix = self.prefix_actions
        if not isinstance(prefix, np.ndarray) or prefix.ndim != 2 or 0 in prefix.shape:
            raise ValueError(f"prefix_actions must be a [P, D] array, got {_shape(prefix)}")
        if not np.isfinite(prefix).all():
            raise ValueError("prefix_actions must be finite numbers")
        for name, least in (("inference_delay_steps", 0), ("execution_horizon", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        if self.inference_delay_steps > prefix.shape[0]:
            raise ValueError(
                f"inference_delay_steps must be at most the prefix's {prefix.shape[0]} rows (the "
                f"rows the robot executes while it waits come from it), got "
                f"{self.inference_delay_steps}"
            )

    @classmethod
    def from_parameters(cls, parameters: Any) -> RTCRequest:
        """The request a ``parameters.rtc`` object (as `parameters` gives it) describes;
        `ValueError` for one that is not such an object."""
        if not isinstance(parameters, Mapping):
            raise ValueError(f"parameters rtc must be an object, got {type(parameters).__name__}")
        try:
            prefix = np.asarray(parameters["prefix_actions"], dtype=np.float32)
            return cls(prefix, parameters["inference_delay_steps"], parameters["execution_horizon"])
        except KeyError as exc:
            raise ValueError(f"parameters rtc lacks {exc}") from None

    @property
    def prefix_steps(self) -> int:
        """Rows in the prefix (P)."""
        return int(self.prefix_actions.shape[0])

    def parameters(self) -> dict[str, Any]:
        """The ``parameters.rtc`` object of an action request."""
        return {
            "prefix_actions": self.prefix_actions.tolist(),
            "inference_delay_steps": self.inference_delay_steps,
            "execution_horizon": self.execution_horizon,
        }

    def openpi_keys(self) -> dict[str, Any]:
        """The observation keys of an openpi request (the prefix as a float32 array)."""
        return {
            OPENPI_PREFIX_KEY: np.ascontiguousarray(self.prefix_actions, dtype=np.float32),
            OPENPI_DELAY_KEY: self.inference_delay_steps,
            OPENPI_HORIZON_KEY: self.execution_horizon,
        }

    def echo(self) -> dict[str, Any]:
        """What a server that applied this request says in its reply's ``rtc`` object."""
        return {
            "applied": True,
            "prefix_steps": self.prefix_steps,
            "inference_delay_steps": self.inference_delay_steps,
            "execution_horizon": self.execution_horizon,
        }


def rtc_openpi_keys(parameters: Any) -> dict[str, Any]:
    """``parameters.rtc`` (as `RTCRequest.parameters` gives it) as openpi's observation keys;
    `ValueError` for one that is not such an object."""
    return RTCRequest.from_parameters(parameters).openpi_keys()


def read_rtc(
    parameters: Mapping[str, Any], observation_extras: Mapping[str, Any], *, action_dim: int,
    action_horizon: int,
) -> RTCRequest | None:  # fmt: skip
    """The RTC request in a decoded request, or None when it carries none.

    Looked for in ``parameters.rtc`` (the action API) and in the ``rtc/*`` observation keys
    (openpi's websocket). The prefix must have `action_dim` columns and at most
    `action_horizon` rows (the server's announced bound), the delay at most the prefix's rows
    (the robot executes them while it waits) and the horizon at most `action_horizon`; anything
    else is a `CodecError` naming the field.
    """
    if PARAMETER in parameters:
        raw = parameters[PARAMETER]
        if not isinstance(raw, Mapping):
            raise CodecError("must be an object", field="parameters.rtc")
        where = "parameters.rtc."
        names = ("prefix_actions", "inference_delay_steps", "execution_horizon")
        values = tuple(raw.get(name) for name in names)
    elif any(key in observation_extras for key in OPENPI_KEYS):
        where = ""
        values = tuple(observation_extras.get(key) for key in OPENPI_KEYS)
        names = OPENPI_KEYS
    else:
        return None
    fields = [where + name for name in names]
    prefix = _prefix(values[0], fields[0], action_dim, action_horizon)
    delay = _count(values[1], fields[1], 0, len(prefix))  # rows executed come from the prefix
    horizon = _count(values[2], fields[2], 1, action_horizon)
    return RTCRequest(prefix, delay, horizon)


def _prefix(value: Any, field: str, action_dim: int, action_horizon: int) -> np.ndarray:
    if value is None:
        raise CodecError("is required with RTC", field=field)
    if isinstance(value, list | tuple | np.ndarray) and len(value) > action_horizon:
        raise CodecError(
            f"{len(value)} rows; this server's chunks have at most {action_horizon}",
            field=field,
        )
    try:
        prefix = np.array(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise CodecError(f"must be a [P, {action_dim}] array of numbers", field=field) from None
    if prefix.ndim != 2 or prefix.shape[0] < 1 or prefix.shape[1] != action_dim:
        raise CodecError(
            f"must be [P, {action_dim}] with P in 1..{action_horizon}, got {list(prefix.shape)}",
            field=field,
        )
    if not np.isfinite(prefix).all():
        raise CodecError("must be finite numbers", field=field)
    return prefix


def _count(value: Any, field: str, least: int, most: int) -> int:
    if isinstance(value, np.integer):
        value = int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise CodecError(f"must be an integer in {least}..{most}, got {value!r}", field=field)
    return value


def announced(capabilities: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """What a server's metadata ``capabilities`` say of RTC: its object, or None when it does
    not announce RTC (absent, null, false, or an object whose ``supported`` is false).

    Read strictly, since a robot's motion depends on it: ``capabilities.rtc`` must be an object
    (or false or null), and its ``supported`` and ``echo``, where given, true or false; anything
    else (``"supported": "false"``, a string that Python would take as true) is a
    `ProtocolError` naming the field."""
    value = capabilities.get(CAPABILITY)
    if value is None or value is False:
        return None
    if not isinstance(value, Mapping):
        raise ProtocolError(
            f"the server's capabilities.{CAPABILITY} must be an object (or false), got {value!r}"
        )
    for name in ("supported", "echo"):
        if name in value and not isinstance(value[name], bool):
            raise ProtocolError(
                f"the server's capabilities.{CAPABILITY}.{name} must be true or false, "
                f"got {value[name]!r}"
            )
    return value if value.get("supported", True) else None


REFERENCE_RTC_POLICY = "reach-flow"
"""The reference server's policy that does real-time chunking (the reach task's flow policy)."""
REFERENCE_SERVER_NAME = "vla-client"
"""The ``server.name`` of the reference server's metadata."""


def where_to_find(server_block: Mapping[str, Any] | None) -> str:
    """Where real-time chunking is served, for a refusal by a server announcing none: the
    reference server (its metadata's `server_block` names it) does it with one policy, which
    this names; others' ways are their own (empty)."""
    if not server_block or server_block.get("name") != REFERENCE_SERVER_NAME:
        return ""
    return (
        "vla-client's server does it with a policy that announces it: "
        f"vla-client serve --policy {REFERENCE_RTC_POLICY}, the reach task's flow policy"
    )


def echoed(capabilities: Mapping[str, Any]) -> bool:
    """Whether a server that announces RTC says in each reply what it applied. Every server
    that announces RTC itself does; an announcement with ``"echo": false`` is one the robot's
    side made for a server that says nothing either way (GR00T's: see
    `vla_client.protocol.declare_rtc`), whose replies cannot be checked. Read as
    strictly as `announced`."""
    value = announced(capabilities)
    return value is not None and value.get("echo", True) is True


def applied(document: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``rtc`` echo of a reply document when it says RTC was applied, else None."""
    echo = document.get(CAPABILITY)
    return echo if isinstance(echo, Mapping) and echo.get("applied") is True else None


def _shape(value: Any) -> str:
    shape = getattr(value, "shape", None)
    return f"shape {list(shape)}" if shape is not None else type(value).__name__

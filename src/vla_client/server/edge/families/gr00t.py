"""GR00T's policy server, served: a ZeroMQ request/reply socket of its own (the `gr00t` extra).

What GR00T's clients (its ``PolicyClient``, vla-client's own) expect of it
(`vla_client.protocol.families.gr00t` describes the messages and packs them):

- ``get_modality_config``: the policy's spec as GR00T's modalities (`modality_config`): its
  cameras as the video keys (``camera`` for a policy that takes any names), the state split
  into the parts `ProtocolSettings.state_split` names (one part, ``state``, without one), the
  actions into those of ``action_split`` (one key, ``action``), the horizon, and GR00T's
  language key ``annotation.human.task_description``; one time step of video and state;
- ``get_action`` with ``{"observation", "options"}``: the nested observation (frames
  ``(1, 1, H, W, 3)`` uint8, state parts ``(1, 1, D)``, the task as ``[[text]]``) is put
  together (the state parts joined in the split's order) and goes through the server's one
  pipeline (`vla_client.server.edge.families.answer`); the answer is ``[actions, {}]``, one
  float32 ``(1, H, D)`` array per action key;
- ``ping`` answers ``{"status": "ok", ...}`` at once, even while the policy loads; ``reset``
  answers ``{}`` (the policy keeps nothing between requests); ``kill`` is refused: the server
  stops as it was started, not at a client's word;
- with an API key, a request whose ``api_token`` is not it answers ``{"error": "Unauthorized:
  Invalid API token"}``; every failure answers ``{"error": message}``, as GR00T's does.

A request larger than the server's body limit (``max_body_bytes``, ``--max-body-mb``) is not
read: ZeroMQ drops the connection it came on, and that client gets no answer. A batch of more
than one observation, more than one time step, or real-time chunking's
options are refused with an error naming them: the reference server serves one observation a
request and does no chunking on this route.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import numpy as np

from vla_client.errors import CodecError, InvalidObservationError
from vla_client.protocol.families.gr00t import MODALITY_CONFIG_CLASS, packb, unpackb
from vla_client.server.config import ProtocolSettings, ServerConfig
from vla_client.server.edge.families.answer import per_key_actions, run_policy, split_columns
from vla_client.server.engine.pipeline import Pipeline, failure
from vla_client.server.policy import PolicySpec

log = logging.getLogger("vla_client.server")

LANGUAGE_KEY = "annotation.human.task_description"
"""The language key GR00T's released embodiments use for the task."""
ANY_CAMERA = "camera"
"""The video key announced for a policy that takes any camera names."""
UNAUTHORIZED = "Unauthorized: Invalid API token"
METRICS_ROUTE = "gr00t"
"""The route ``/metrics`` counts GR00T's requests under."""
RTC_OPTIONS = ("rtc_overlap_steps", "rtc_frozen_steps", "rtc_ramp_rate")


def check(spec: PolicySpec, settings: ProtocolSettings) -> None:
    """`ValueError` for a split that does not cut the policy's state or actions."""
    if settings.state_split is not None and spec.state_dim is not None:
        split_columns(settings.state_split, spec.state_dim, "state")
    if settings.action_split is not None:
        split_columns(settings.action_split, spec.action_dim, "action")


def _modality(keys: list[str], steps: int = 1) -> dict[str, Any]:
    fields = {
        "delta_indices": list(range(steps)),
        "modality_keys": keys,
        "sin_cos_embedding_keys": None,
        "mean_std_embedding_keys": None,
        "action_configs": None,
    }
    return {MODALITY_CONFIG_CLASS: True, "as_json": fields}


def video_keys(spec: PolicySpec) -> list[str]:
    """The cameras GR00T's config announces."""
    return list(spec.camera_names) or [ANY_CAMERA]


def state_keys(settings: ProtocolSettings) -> list[str]:
    """The state parts GR00T's config announces."""
    return list(settings.state_split or ["state"])


def action_split(spec: PolicySpec, settings: ProtocolSettings) -> dict[str, int]:
    """The action keys and their lengths, in the chunk's column order."""
    return settings.action_split or {"action": spec.action_dim}


def modality_config(spec: PolicySpec, settings: ProtocolSettings) -> dict[str, Any]:
    """``get_modality_config``'s answer for `spec`."""
    return {
        "video": _modality(video_keys(spec)),
        "state": _modality(state_keys(settings)),
        "action": _modality(list(action_split(spec, settings)), spec.action_horizon),
        "language": _modality([LANGUAGE_KEY]),
    }


def _one(value: Any, where: str, ndim: int, dtype: str) -> np.ndarray:
    """A ``(1, 1, ...)`` array of `ndim` dimensions, as its one step."""
    if not isinstance(value, np.ndarray) or value.ndim != ndim or value.dtype.kind not in dtype:
        shape = getattr(value, "shape", type(value).__name__)
        raise CodecError(f"{where} must be a {ndim}-D array (batch, time, ...), got {shape}")
    if value.shape[:2] != (1, 1):
        raise InvalidObservationError(
            f"{where}: this server takes one observation of one time step, shape (1, 1, ...); "
            f"got {value.shape}"
        )
    step: np.ndarray = value[0, 0]
    return step


def _map(observation: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    block = observation.get(name)
    if not isinstance(block, Mapping):
        raise CodecError(f"observation.{name} must be a map")
    return block


def read_observation(
    data: Any, cameras: list[str], parts: list[str]
) -> tuple[dict[str, np.ndarray], np.ndarray, str]:
    """The frames, the joined state and the task of ``get_action``'s data; `CodecError` or
    `InvalidObservationError` naming what is missing or malformed."""
    observation = _observation(data)
    video, state, language = (_map(observation, name) for name in ("video", "state", "language"))
    for name, keys, given in (("video", cameras, video), ("state", parts, state)):
        missing = [key for key in keys if key not in given]
        if missing:
            raise InvalidObservationError(
                f"observation.{name}: missing {missing}; this server's keys are {keys}"
            )
    frames = {key: _one(video[key], f"video {key!r}", 5, "u") for key in cameras}
    values = [_one(state[key], f"state {key!r}", 3, "fiu") for key in parts]
    return frames, np.concatenate(values), _task(language)


def _observation(data: Any) -> Mapping[str, Any]:
    """``get_action``'s observation map; `InvalidObservationError` for real-time chunking's
    previous action or options, which this server does not do on GR00T's protocol."""
    observation = data.get("observation") if isinstance(data, Mapping) else None
    if not isinstance(observation, Mapping):
        raise CodecError("get_action's data needs an observation map")
    options = data.get("options") or {}
    asked = sorted(set(RTC_OPTIONS) & set(options)) if isinstance(options, Mapping) else []
    if asked or "action" in observation:
        raise InvalidObservationError(
            "this server does no real-time chunking on GR00T's protocol; send no previous "
            f"action and no {list(RTC_OPTIONS)} options"
        )
    return observation


def _task(language: Mapping[str, Any]) -> str:
    """The one task of the language map, sent as ``[[task]]``."""
    texts = language.get(LANGUAGE_KEY)
    if not (
        isinstance(texts, list) and len(texts) == 1 and isinstance(texts[0], list)
        and len(texts[0]) == 1 and isinstance(texts[0][0], str)
    ):  # fmt: skip
        raise CodecError(f"observation.language[{LANGUAGE_KEY!r}] must be [[task]]")
    task: str = texts[0][0]
    return task


class Gr00tRoute:
    """The answers of GR00T's endpoints for `pipeline`'s policy."""

    def __init__(self, pipeline: Pipeline, settings: ProtocolSettings, api_key: str | None):
        spec = pipeline.policy.spec
        self.pipeline = pipeline
        self.api_key = api_key
        self.config = modality_config(spec, settings)
        self.cameras = video_keys(spec)
        self.parts = state_keys(settings)
        split = action_split(spec, settings)
        self.columns = split_columns(split, spec.action_dim, "action")

    async def answer(self, frame: bytes) -> tuple[Any, int]:
        """The reply document to one request's bytes, and its status for the metrics."""
        started = time.perf_counter()
        try:
            request = unpackb(frame)
            if not isinstance(request, Mapping):
                raise CodecError("a request must be a msgpack map")
            if self.api_key is not None and request.get("api_token") != self.api_key:
                return {"error": UNAUTHORIZED}, 401
            endpoint = request.get("endpoint", "get_action")
            if endpoint == "ping":
                return {"status": "ok", "message": "Server is running"}, 200
            if endpoint == "get_modality_config":
                return self.config, 200
            if endpoint == "reset":
                return {}, 200
            if endpoint == "get_action":
                return await self.actions(request.get("data"), started), 200
            if endpoint == "kill":
                raise CodecError("kill is not served here: stop vla-client serve as it was started")
            raise CodecError(f"Unknown endpoint: {endpoint}")
        except Exception as exc:  # every failure is an error answer, as GR00T's server gives
            status = failure(exc, None, self.pipeline.failures)
            return {"error": status.detail}, status.status

    async def actions(self, data: Any, started: float) -> list[Any]:
        images, state, task = read_observation(data, self.cameras, self.parts)
        chunk = await run_policy(self.pipeline, images, state, task, started=started)
        return [per_key_actions(chunk, self.columns), {}]


def zmq_host(host: str) -> str:
    """`host` as ZeroMQ binds it: an address (IPv6 in brackets), as it resolves no names."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = ipaddress.ip_address(socket.gethostbyname(host))
    return f"[{address}]" if address.version == 6 else str(address)


@contextlib.asynccontextmanager
async def serve_socket(pipeline: Pipeline, config: ServerConfig) -> AsyncIterator[str]:
    """GR00T's socket on `config`'s host, answering until the block ends; yields its URL."""
    import zmq
    import zmq.asyncio

    settings = config.protocol
    assert settings is not None
    route = Gr00tRoute(pipeline, settings, config.api_key)
    context = zmq.asyncio.Context()
    replies = context.socket(zmq.REP)
    replies.setsockopt(zmq.LINGER, 0)
    replies.setsockopt(zmq.MAXMSGSIZE, config.max_body_bytes)  # past it, ZeroMQ drops the peer
    host = zmq_host(config.host)
    if host.startswith("["):
        replies.setsockopt(zmq.IPV6, 1)
    try:
        if settings.bound_port == 0:
            port = replies.bind_to_random_port(f"tcp://{host}")
        else:
            port = settings.bound_port
            replies.bind(f"tcp://{host}:{port}")
    except zmq.ZMQError:
        replies.close()
        context.term()
        raise
    url = f"tcp://{host}:{port}"
    log.info("GR00T's policy server (ZeroMQ) on %s", url)
    pipeline.metrics.routes = pipeline.metrics.routes | {METRICS_ROUTE}

    async def serve() -> None:
        while True:
            frame = await replies.recv()
            answer, status = await route.answer(frame)
            pipeline.metrics.count(METRICS_ROUTE, status)
            await replies.send(packb(answer))

    task = asyncio.ensure_future(serve())
    try:
        yield url
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        replies.close()
        context.term()

"""Build and encode action requests on the robot: the one builder every client uses.

Two documents can carry an observation. The action request (POST /v1/actions/generations, and
every frame of the realtime websocket)::

    {"request_id": "act_...",
     "input": {"task": "...", "observation": {"images": {camera: <image value>},
                                              "state": [...], "capture_times": {camera: s},
                                              "depth": {camera: <depth value>}}},
     "parameters": {"action_horizon": 16, ...}, "runtime": {"return_timing": true, ...}}

and an openpi request (the ``/openpi/policy`` websocket), a flat dict whose keys an openpi
layout names (``observation.images.<cam>``, ``observation.state`` and ``prompt`` by default), the
sampling parameters at its top level. Image values take the form `encoding` gives them on `wire`
(see `vla_client.protocol.image_forms`). Depth frames (`Observation.depth`) travel in the
action request only, under ``depth`` beside ``images`` (left out when there are none, so a
request without depth is what it always was); an openpi request refuses them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import TypeAdapter

from vla_client.codecs import DEFAULT_JPEG_QUALITY, map_frames
from vla_client.errors import CodecError
from vla_client.observation import Observation
from vla_client.protocol.image_forms import (
    Encoding,
    encode_depth_value,
    encode_image_value,
    encodes_in_parallel,
)
from vla_client.protocol.layouts import FLAT, LayoutFunction, OpenpiLayout
from vla_client.protocol.models import (
    ActionRequest,
    RuntimeOptions,
    check_request_id,
    validate_block,
)
from vla_client.protocol.rtc import PARAMETER, rtc_openpi_keys
from vla_client.protocol.wire import CONTENT_TYPES, Wire, dumps


def build_request(
    observation: Observation,
    *,
    encoding: Encoding = "png",
    wire: Wire = "json",
    request_id: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    runtime: Mapping[str, Any] | None = None,
    jpeg_quality: int = DEFAULT_JPEG_QUALITY,
) -> ActionRequest:
    """The typed request for `observation`, with each frame encoded as `encoding` for `wire`.

    Raises `CodecError` for a `runtime` block the API does not allow, a `request_id` that is
    not a string, or a depth frame `encoding` cannot carry exactly (`encode_depth_value`).
    """
    payload = request_payload(
        observation, encoding=encoding, wire=wire, request_id=request_id,
        parameters=parameters, runtime=runtime, jpeg_quality=jpeg_quality,
    )  # fmt: skip
    return ActionRequest.model_validate(payload)


def request_payload(
    observation: Observation,
    *,
    encoding: Encoding = "png",
    wire: Wire = "json",
    request_id: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    runtime: Mapping[str, Any] | None = None,
    jpeg_quality: int = DEFAULT_JPEG_QUALITY,
) -> dict[str, Any]:
    """``build_request(...).to_payload()``, the same document key for key, without building
    the models: what they would check of an `Observation` (its task a string, its capture
    times finite seconds) it has checked itself, and the blocks are checked here as there.
    This is every request's path (`encode_request`); the models' validation of the nested
    document cost more than the rest of a raw msgpack request's encoding."""
    check_request_id(request_id)
    runtime_block = runtime_document(runtime)
    images, state, depth = _observation_parts(observation, encoding, wire, jpeg_quality)
    block: dict[str, Any] = {"images": images}
    if state is not None:
        block["state"] = state
    if observation.capture_times:
        block["capture_times"] = dict(observation.capture_times)
    if depth:
        block["depth"] = depth
    payload: dict[str, Any] = {
        "input": {"task": observation.task, "observation": block},
        "parameters": _checked_parameters(parameters),
        "runtime": runtime_block,
    }
    if request_id is not None:
        payload["request_id"] = request_id
    return payload


def runtime_document(runtime: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``runtime`` block as a request carries it: checked as `RuntimeOptions` (a
    `CodecError` naming the bad field), without the values that are its defaults. A block of
    plain values is checked once and remembered: a control loop sends the same one each time."""
    block = dict(runtime or {})
    if not block:  # nothing to check, nothing left once the defaults are taken out
        return {}
    items = tuple((key, type(value), value) for key, value in block.items())
    if all(kind in _PLAIN_TYPES for _, kind, _ in items):
        return dict(_plain_runtime_document(items))
    return _runtime_dump(block)


_PLAIN_TYPES = frozenset({str, bool, int, float, type(None)})
"""The values a remembered runtime block holds; with their types in the key, ``1`` and
``True`` (equal in Python) stay apart."""


@functools.lru_cache(maxsize=32)
def _plain_runtime_document(items: tuple[tuple[Any, type, Any], ...]) -> dict[str, Any]:
    return _runtime_dump({key: value for key, _, value in items})


def _runtime_dump(block: dict[str, Any]) -> dict[str, Any]:
    return validate_block(RuntimeOptions, block, "runtime").model_dump(exclude_defaults=True)


def _checked_parameters(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``parameters`` block as `ActionRequest` checks it: a map with string keys."""
    block = dict(parameters or {})
    return _PARAMETERS.validate_python(block) if block else block


_PARAMETERS = TypeAdapter(dict[str, Any])


def _observation_parts(
    observation: Observation, encoding: Encoding, wire: Wire, jpeg_quality: int
) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    """The images, state and depth as `wire` carries them."""
    depth = {  # first: a depth frame the encoding cannot carry is refused before any work
        name: encode_depth_value(frame, encoding, wire) for name, frame in observation.depth.items()
    }
    images = encode_images(observation, encoding, wire, jpeg_quality)
    state: Any = observation.state
    if state is not None:
        state = state.astype(np.float32, copy=False)  # the action API's state is float32
        if wire == "json":
            state = state.tolist()
    return images, state, depth


def build_openpi_request(
    observation: Observation,
    layout: OpenpiLayout | LayoutFunction = FLAT,
    *,
    encoding: Encoding = "raw",
    request_id: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    jpeg_quality: int = DEFAULT_JPEG_QUALITY,
) -> dict[str, Any]:
    """The request an openpi policy server takes, in `layout` (see `vla_client.protocol.layouts`).

    Frames travel as `encoding` for msgpack (``raw``: the ndarrays themselves, the only form
    openpi's own servers read); the state keeps the observation's dtype (float64 stays float64,
    as openpi's examples send joint readings). The sampling `parameters` go in as top-level
    keys, and a `request_id` if given, which servers built on this package echo back (the
    clients give none: openpi's own requests carry only the layout's keys); a ``rtc`` parameter
    (`vla_client.protocol.rtc`) becomes the ``rtc/*`` observation keys. A layout function
    gets the observation and returns the dict; parameters and the request id are added to it.
    """
    check_request_id(request_id)
    if observation.depth:
        raise CodecError(
            f"openpi requests carry no depth frames ({', '.join(observation.depth)}); send them "
            "on the action API (HTTP, the /v1/actions/realtime websocket or ipc://)"
        )
    if isinstance(layout, OpenpiLayout):
        request = layout.encode(
            observation, encode_images(observation, encoding, "msgpack", jpeg_quality)
        )
    else:
        request = layout(observation)
        if not isinstance(request, dict):
            raise TypeError(
                f"an openpi layout function must return a dict, got {type(request).__name__}"
            )
        request = dict(request)
    parameters = dict(parameters or {})
    if PARAMETER in parameters:  # openpi forks carry real-time chunking as observation keys
        request.update(rtc_openpi_keys(parameters.pop(PARAMETER)))
    request.update(parameters)
    if request_id is not None:
        request["request_id"] = request_id
    return request


def encode_images(
    observation: Observation, encoding: Encoding, wire: Wire, jpeg_quality: int
) -> dict[str, Any]:
    """Each camera's frame as its wire value, in parallel threads where that is faster (see
    `encodes_in_parallel`)."""
    names = list(observation.images)

    def encode(name: str) -> Any:
        return encode_image_value(
            observation.images[name], encoding, wire, jpeg_quality=jpeg_quality
        )

    if encodes_in_parallel(encoding, wire):
        return dict(zip(names, map_frames(encode, names), strict=True))
    return {name: encode(name) for name in names}


def encode_request(
    observation: Observation,
    *,
    encoding: Encoding = "png",
    wire: Wire = "json",
    request_id: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    runtime: Mapping[str, Any] | None = None,
    jpeg_quality: int = DEFAULT_JPEG_QUALITY,
    openpi: OpenpiLayout | LayoutFunction | None = None,
) -> tuple[bytes, str]:
    """Encode `observation` as a request body; returns ``(body, content_type)``.

    Usable with any HTTP stack: POST the body to ``/v1/actions/generations`` with that
    Content-Type. With an `openpi` layout, the body is an openpi request in that layout
    (msgpack only, and no runtime block: openpi's servers have none).
    """
    if openpi is not None:
        if wire != "msgpack":
            raise ValueError("openpi requests travel as msgpack only")
        if runtime:
            raise ValueError("openpi requests have no runtime block; drop runtime options")
        payload = build_openpi_request(
            observation,
            openpi,
            encoding=encoding,
            request_id=request_id,
            parameters=parameters,
            jpeg_quality=jpeg_quality,
        )
    else:
        payload = request_payload(
            observation,
            encoding=encoding,
            wire=wire,
            request_id=request_id,
            parameters=parameters,
            runtime=runtime,
            jpeg_quality=jpeg_quality,
        )
    return dumps(payload, wire), CONTENT_TYPES[wire]

"""Build and encode action requests on the robot: the one builder every client uses.

Two documents can carry an observation. The action request (POST /v1/actions/generations, and
every frame of the realtime websocket)::

    {"request_id": "act_...",
     "input": {"task": "...", "observation": {"images": {camera: <image value>},
                                              "state": [...], "capture_times": {camera: s}}},
     "parameters": {"action_horizon": 16, ...}, "runtime": {"return_timing": true, ...}}

and openpi's flat observation (the ``/openpi/policy`` websocket), with ``observation.images.<cam>``
and ``observation.state`` keys, ``prompt`` and the sampling parameters at the top level. Image
values take the form `encoding` gives them on `wire` (see `vla_client.protocol.image_forms`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vla_client.codecs import DEFAULT_JPEG_QUALITY, map_frames
from vla_client.observation import Observation
from vla_client.protocol.image_forms import Encoding, encode_image_value
from vla_client.protocol.models import (
    ActionInput,
    ActionRequest,
    ObservationPayload,
    RuntimeOptions,
    validate_block,
)
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

    Raises `CodecError` for a `runtime` block the API does not allow.
    """
    runtime_options = validate_block(RuntimeOptions, dict(runtime or {}), "runtime")
    images = encode_images(observation, encoding, wire, jpeg_quality)
    state: Any = observation.state
    if state is not None and wire == "json":
        state = state.tolist()
    return ActionRequest(
        request_id=request_id,
        input=ActionInput(
            task=observation.task,
            observation=ObservationPayload(
                images=images,
                state=state,
                capture_times=dict(observation.capture_times) or None,
            ),
        ),
        parameters=dict(parameters or {}),
        runtime=runtime_options,
    )


def build_flat_request(
    observation: Observation,
    *,
    encoding: Encoding = "raw",
    request_id: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    jpeg_quality: int = DEFAULT_JPEG_QUALITY,
) -> dict[str, Any]:
    """openpi's flat observation for msgpack: what ``/openpi/policy`` takes.

    ``observation.images.<cam>`` (an HxWx3 uint8 ndarray with ``raw``, the only form openpi's
    own servers read), ``observation.state`` (float32), ``prompt``, the sampling `parameters`
    as top-level keys, and ``request_id``, which servers built on this package echo back.
    """
    images = encode_images(observation, encoding, "msgpack", jpeg_quality)
    flat: dict[str, Any] = {f"observation.images.{name}": value for name, value in images.items()}
    if observation.state is not None:
        flat["observation.state"] = observation.state
    flat["prompt"] = observation.task
    flat.update(parameters or {})
    if request_id is not None:
        flat["request_id"] = request_id
    return flat


def encode_images(
    observation: Observation, encoding: Encoding, wire: Wire, jpeg_quality: int
) -> dict[str, Any]:
    """Each camera's frame as its wire value, encoded in parallel (see `map_frames`)."""
    names = list(observation.images)
    values = map_frames(
        lambda name: encode_image_value(
            observation.images[name], encoding, wire, jpeg_quality=jpeg_quality
        ),
        names,
    )
    return dict(zip(names, values, strict=True))


def encode_request(
    observation: Observation,
    *,
    encoding: Encoding = "png",
    wire: Wire = "json",
    request_id: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    runtime: Mapping[str, Any] | None = None,
    jpeg_quality: int = DEFAULT_JPEG_QUALITY,
    flat: bool = False,
) -> tuple[bytes, str]:
    """Encode `observation` as a request body; returns ``(body, content_type)``.

    Usable with any HTTP stack: POST the body to ``/v1/actions/generations`` with that
    Content-Type. With `flat`, the body is openpi's flat observation (msgpack only, and no
    runtime block: openpi's servers have none).
    """
    if flat:
        if wire != "msgpack":
            raise ValueError("openpi's flat observation travels as msgpack only")
        if runtime:
            raise ValueError("openpi's flat observation has no runtime block; drop runtime options")
        payload = build_flat_request(
            observation,
            encoding=encoding,
            request_id=request_id,
            parameters=parameters,
            jpeg_quality=jpeg_quality,
        )
    else:
        payload = build_request(
            observation,
            encoding=encoding,
            wire=wire,
            request_id=request_id,
            parameters=parameters,
            runtime=runtime,
            jpeg_quality=jpeg_quality,
        ).to_payload()
    return dumps(payload, wire), CONTENT_TYPES[wire]

"""Typed models of the action API's request and metadata documents.

Requests: `ActionRequest` -> `ActionInput` -> `ObservationPayload`, plus `parameters` and
`RuntimeOptions`; the models also give the request's JSON schema for the OpenAPI document.
`ActionMetadata` is GET /v1/actions/metadata, which tells a client what the policy expects:
the one type the server builds it from and the client reads it into (its fields are read by
`vla_client.protocol.metadata_fields`).
Replies are plain documents, described in `vla_client.protocol.reply_read`: they are built per
request on the server, where a model would only add a copy.

Every model allows extra fields: SGLang's pipelines add their own keys (cache, parallel,
Cosmos3 options) and a client must not break on them. Image values are typed `Any` because they
hold whichever wire form was chosen (a ``{"b64_json": ...}`` dict, an ndarray, a pixel list); the
codecs, not pydantic, own their validation, so that validating a request never walks millions of
pixels.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from vla_client.errors import CodecError, ProtocolError
from vla_client.protocol.metadata_fields import (
    LEAST_DIM,
    check_chunk,
    parse_image_size,
    read_camera_aliases,
    read_depth_cameras,
    read_dim,
    read_image_keys,
    read_image_size_required,
)

# Where they lived until the fields got their own module; still importable from here.
from vla_client.protocol.metadata_fields import (
    MAX_METADATA_ACTION_VALUES as MAX_METADATA_ACTION_VALUES,
)
from vla_client.protocol.metadata_fields import MAX_METADATA_CAMERAS as MAX_METADATA_CAMERAS
from vla_client.protocol.metadata_fields import MAX_METADATA_DIM as MAX_METADATA_DIM
from vla_client.protocol.metadata_fields import MAX_METADATA_PIXELS as MAX_METADATA_PIXELS
from vla_client.protocol.metadata_fields import check_metadata_bounds as check_metadata_bounds


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)


class RuntimeOptions(_Open):
    """The ``runtime`` block: how to answer rather than what to compute."""

    response_format: Literal["envelope", "raw"] = "envelope"
    output_format: Literal["list", "numpy"] | None = None
    return_timing: bool = True
    return_digest: bool = False
    prefix_cache: bool | Literal["auto"] | None = None
    cuda_graph: bool | Literal["auto"] | None = None

    @field_validator("response_format", "output_format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value


class SamplingParameters(_Open):
    """The ``parameters`` block; values the policy does not know are kept and ignored."""

    action_horizon: int | None = Field(default=None, gt=0)
    action_dim: int | None = Field(default=None, gt=0)
    num_inference_steps: int | None = Field(default=None, gt=0)
    seed: int | None = Field(default=None, ge=0)
    guidance_scale: float | None = Field(default=None, ge=0)
    guidance_scale_action: float | None = Field(default=None, ge=0)
    output_format: Literal["list", "numpy"] | None = None

    @field_validator("seed", mode="before")
    @classmethod
    def _no_bool_seed(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("seed must be a non-negative integer, not a bool")
        return value


class ObservationPayload(_Open):
    """``input.observation``: per-camera image values, state, and capture times and depth
    frames (extensions)."""

    images: dict[str, Any] = Field(default_factory=dict)
    state: Any = None
    capture_times: dict[str, FiniteFloat] | None = None
    """Seconds each camera's frame was taken, finite (an age from NaN or infinity means
    nothing; the server's decoder refuses them on every wire too)."""
    depth: dict[str, Any] = Field(default_factory=dict)
    """Depth cameras' frames by name, in the forms of
    `vla_client.protocol.image_forms.encode_depth_value`; for servers that announce them
    (``input.depth_cameras``)."""


class ActionInput(_Open):
    """``input``: the task text and the observation."""

    task: str | None = None
    prompt: str | None = None
    observation: ObservationPayload = Field(default_factory=ObservationPayload)


class ActionRequest(_Open):
    """The body of POST /v1/actions/generations (and of a realtime websocket message)."""

    request_id: str | None = None
    model: str | None = None
    input: ActionInput
    parameters: dict[str, Any] = Field(default_factory=dict)
    runtime: RuntimeOptions = Field(default_factory=RuntimeOptions)

    def to_payload(self) -> dict[str, Any]:
        """The wire document as plain containers, without copying image values.

        `model_dump` would walk every pixel of a pixel-list image; this keeps image values as
        the objects they are (base64 dicts, ndarrays, lists) and dumps only the small parts.
        """
        observation = self.input.observation
        obs: dict[str, Any] = {"images": dict(observation.images)}
        if observation.state is not None:
            obs["state"] = observation.state
        if observation.capture_times:
            obs["capture_times"] = observation.capture_times
        if observation.depth:
            obs["depth"] = dict(observation.depth)
        obs.update(observation.model_extra or {})
        payload: dict[str, Any] = {
            "input": {"task": self.input.task or "", "observation": obs},
            "parameters": self.parameters,
            "runtime": self.runtime.model_dump(exclude_defaults=True),
        }
        if self.request_id is not None:
            payload["request_id"] = self.request_id
        if self.model is not None:
            payload["model"] = self.model
        return payload


class MetadataInput(_Open):
    """What the policy expects to receive.

    `image_keys` are the camera names it reads (empty: any), `camera_aliases` other names it
    takes for them, `image_size` its frame size ``[height, width]``, refused when different if
    `image_size_required`; `state_dim` its state length; `openpi_layout` the request layout of
    its openpi websocket; `depth_cameras` the depth cameras it reads (name -> ``"uint16"`` or
    ``"float32"``, the dtype their frames must have; empty: it takes no depth), apart from
    `image_keys`, which name colour cameras only (an extension SGLang's clients ignore).

    Each field is read by its function in `vla_client.protocol.metadata_fields`, which raises
    `ProtocolError` for a wrong form or a size out of bounds. `image_size` may come in any of
    the forms servers send (``224``, ``[H, W]``, ``[H, W, C]``, ``[C, H, W]``,
    ``{"height", "width"}``) and is kept as ``[H, W]``; null image keys or aliases are none.
    """

    image_keys: list[str] = Field(default_factory=list)
    image_size: list[int] | None = None
    image_size_required: bool = False
    camera_aliases: dict[str, str] = Field(default_factory=dict)
    state_dim: int | None = None
    openpi_layout: str | None = None
    depth_cameras: dict[str, str] = Field(default_factory=dict)

    @field_validator("image_keys", mode="before")
    @classmethod
    def _image_keys(cls, value: Any) -> list[str]:
        return read_image_keys(value)

    @field_validator("depth_cameras", mode="before")
    @classmethod
    def _depth_cameras(cls, value: Any) -> dict[str, str]:
        return read_depth_cameras(value)

    @model_serializer(mode="wrap")
    def _without_empty_depth(self, dump: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The block as dumped, ``depth_cameras`` left out when there are none: a server
        without depth announces what servers announced before depth existed."""
        document: dict[str, Any] = dump(self)
        if not self.depth_cameras:
            document.pop("depth_cameras", None)
        return document

    @field_validator("image_size", mode="before")
    @classmethod
    def _image_size(cls, value: Any) -> list[int] | None:
        size = parse_image_size(value)
        return None if size is None else list(size)

    @field_validator("image_size_required", mode="before")
    @classmethod
    def _image_size_required(cls, value: Any) -> bool:
        return read_image_size_required(value)

    @field_validator("camera_aliases", mode="before")
    @classmethod
    def _camera_aliases(cls, value: Any) -> dict[str, str]:
        return read_camera_aliases(value)

    @field_validator("state_dim", mode="before")
    @classmethod
    def _state_dim(cls, value: Any) -> int | None:
        return read_dim("input.state_dim", value, LEAST_DIM["state_dim"])


class MetadataOutput(_Open):
    """What the policy returns; its counts are read as `MetadataInput.state_dim` is, and the
    chunk they make is bounded too (`vla_client.protocol.metadata_fields`)."""

    action_type: str = "continuous"
    action_horizon: int | None = None
    action_dim: int | None = None
    padded_action_dim: int | None = None
    dtype: str = "float32"

    @field_validator("action_horizon", "action_dim", "padded_action_dim", mode="before")
    @classmethod
    def _count(cls, value: Any, info: ValidationInfo) -> int | None:
        name = str(info.field_name)
        return read_dim(f"output.{name}", value, LEAST_DIM[name])

    @model_validator(mode="after")
    def _chunk(self) -> MetadataOutput:
        check_chunk(self.action_horizon, self.action_dim, self.padded_action_dim)
        return self


class ActionMetadata(_Open):
    """GET /v1/actions/metadata, also the first frame on both websockets.

    The one type of the metadata: the reference server builds its document from it
    (`vla_client.server.metadata_document`), a client reads a server's document into it
    (`read_metadata`) and fits observations to what it says
    (`vla_client.client.fit.FramePreprocessor.from_metadata`). An ``input`` or ``output`` of
    null is an empty one. Built in code, it raises the fields' own `ProtocolError` (pydantic
    passes it through) and pydantic's `ValidationError` for the other fields; `read_metadata`
    gives a `ProtocolError` for both.
    """

    object: Literal["action.metadata"] = "action.metadata"
    model: str | None = None
    model_path: str | None = None
    policy_family: str | None = None
    input: MetadataInput = Field(default_factory=MetadataInput)
    output: MetadataOutput = Field(default_factory=MetadataOutput)
    defaults: dict[str, Any] = Field(default_factory=dict)
    capabilities: dict[str, Any] = Field(default_factory=dict)
    server: dict[str, Any] | None = None
    """The reference server's own addition, its ``name`` and ``version``; others send none."""
    policy: Any = None
    """What the server says it serves, where it says: the reference server sends a LeRobot
    policy's ``{"type": ..., "path": ...}``; openpi-style servers may put anything here (a
    name), which is kept as sent. None when absent."""

    @field_validator("input", "output", mode="before")
    @classmethod
    def _block(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return {}
        if not isinstance(value, Mapping | BaseModel):
            raise ProtocolError(
                f"metadata {info.field_name!r} must be an object, got {type(value).__name__}"
            )
        return value


def read_metadata(document: Any) -> ActionMetadata:
    """`document` (a server's metadata, as parsed off the wire) as `ActionMetadata`.

    `ProtocolError` when it is not an object, when a field the client reads has the wrong form
    or a size out of bounds (the message of `vla_client.protocol.metadata_fields`), or when any
    other field does not fit the model (``the server's metadata is malformed: ...``).
    """
    if not isinstance(document, Mapping):
        raise ProtocolError(
            f"the server's metadata is malformed: expected an object, got {type(document).__name__}"
        )
    try:
        return ActionMetadata.model_validate(document)
    except ValidationError as exc:
        raise ProtocolError(
            f"the server's metadata is malformed: {validation_message(exc, 'metadata')}"
        ) from None


ModelT = TypeVar("ModelT", bound=BaseModel)


def new_request_id() -> str:
    """A fresh request id, ``act_<32 hex digits>`` as SGLang generates them (the client gives
    one to each request, the server to each request that came without one)."""
    return f"act_{os.urandom(16).hex()}"


def check_request_id(request_id: object) -> None:
    """`CodecError` naming ``request_id`` unless it is a string or None: a request built with
    another kind of id fails here, typed, rather than as pydantic's `ValidationError`."""
    if request_id is not None and not isinstance(request_id, str):
        raise CodecError(
            f"must be a string or None; got {type(request_id).__name__}", field="request_id"
        )


def validate_block(model: type[ModelT], raw: Any, name: str) -> ModelT:
    """`raw` (the request's `name` block) as `model`, or a `CodecError` naming the bad field."""
    if not isinstance(raw, dict):
        raise CodecError(f"{name} must be an object", field=name)
    try:  # an empty block (the usual case) too: pydantic's core fills in the defaults in a
        # third of the time `model_construct` takes to do it in Python
        return model.model_validate(raw)
    except ValidationError as exc:
        raise CodecError(validation_message(exc, name)) from None


def validation_message(exc: ValidationError, root: str) -> str:
    """The first error of `exc`, as ``root.field: message``."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in (root, *first["loc"]))
    return f"{where}: {first['msg']}"

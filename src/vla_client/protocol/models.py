"""Typed models of the action API's request and metadata documents.

Requests: `ActionRequest` -> `ActionInput` -> `ObservationPayload`, plus `parameters` and
`RuntimeOptions`; the models also give the request's JSON schema for the OpenAPI document.
`ActionMetadata` is GET /v1/actions/metadata, which tells a client what the policy expects.
Replies are plain documents, described in `vla_client.protocol.reply_read`: they are built per
request on the server, where a model would only add a copy.

Every model allows extra fields: SGLang's pipelines add their own keys (cache, parallel,
Cosmos3 options) and a client must not break on them. Image values are typed `Any` because they
hold whichever wire form was chosen (a ``{"b64_json": ...}`` dict, an ndarray, a pixel list); the
codecs, not pydantic, own their validation, so that validating a request never walks millions of
pixels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from vla_client.errors import CodecError, ProtocolError


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
    """``input.observation``: per-camera image values, state, and capture times (an extension)."""

    images: dict[str, Any] = Field(default_factory=dict)
    state: Any = None
    capture_times: dict[str, float] | None = None


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
    takes for them, `image_size` its frame size (height, width), refused when different if
    `image_size_required`; `state_dim` its state length; `openpi_layout` the request layout of
    its openpi websocket.
    """

    image_keys: list[str] = Field(default_factory=list)
    image_size: list[int] | None = None
    image_size_required: bool = False
    camera_aliases: dict[str, str] = Field(default_factory=dict)
    state_dim: int | None = None
    openpi_layout: str | None = None


class MetadataOutput(_Open):
    """What the policy returns."""

    action_type: str = "continuous"
    action_horizon: int | None = None
    action_dim: int | None = None
    padded_action_dim: int | None = None
    dtype: str = "float32"


class ActionMetadata(_Open):
    """GET /v1/actions/metadata, also the first frame on both websockets."""

    object: Literal["action.metadata"] = "action.metadata"
    model: str | None = None
    model_path: str | None = None
    policy_family: str | None = None
    input: MetadataInput = Field(default_factory=MetadataInput)
    output: MetadataOutput = Field(default_factory=MetadataOutput)
    defaults: dict[str, Any] = Field(default_factory=dict)
    capabilities: dict[str, Any] = Field(default_factory=dict)
    policy: Any = None
    """What the server says it serves, where it says: the reference server sends a LeRobot
    policy's ``{"type": ..., "path": ...}``; openpi-style servers may put anything here (a
    name), which is kept as sent. None when absent."""


MAX_METADATA_PIXELS = 4096 * 4096
"""Largest frame (height x width) a server may announce: the reference server's own default
``max_image_pixels`` (`vla_client.codecs.DEFAULT_MAX_PIXELS`, not imported here: that would
load the image libraries with the models). A client pads frames to the announced size, so a
larger claim would have it allocate whatever the server said."""
MAX_METADATA_CAMERAS = 16
"""Most cameras a server may announce, the reference server's own ``max_cameras``."""
MAX_METADATA_DIM = 65536
"""Largest action horizon, action dim or state dim a server may announce."""
MAX_METADATA_ACTION_VALUES = 1 << 20
"""Largest action chunk (horizon x dim) a server may announce."""
_METADATA_DIMS = (
    ("input", "state_dim", 0),
    ("output", "action_horizon", 1),
    ("output", "action_dim", 1),
    ("output", "padded_action_dim", 1),
)
"""Counts in the metadata: their block, name and least value (a policy may take no state)."""


def check_metadata_bounds(metadata: Mapping[str, Any]) -> None:
    """`ProtocolError` unless the sizes and counts in `metadata` are sane, read before anything
    is sized from them: whole dims within ``0..MAX_METADATA_DIM`` (actions at least 1), an
    ``image_size`` of positive sides within `MAX_METADATA_PIXELS`, at most
    `MAX_METADATA_CAMERAS` image keys and an action chunk within `MAX_METADATA_ACTION_VALUES`.
    Absent fields are fine; their forms are checked where they are used."""
    blocks = {name: metadata.get(name) for name in ("input", "output")}
    for block, field_name, least in _METADATA_DIMS:
        spec = blocks[block]
        value = spec.get(field_name) if isinstance(spec, Mapping) else None
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProtocolError(
                f"metadata {block}.{field_name} must be a whole number, got {value!r}"
            )
        if not least <= value <= MAX_METADATA_DIM:
            raise ProtocolError(
                f"metadata {block}.{field_name} is {value}, outside {least}..{MAX_METADATA_DIM}"
            )
    output = blocks["output"] if isinstance(blocks["output"], Mapping) else {}
    horizon, dim = output.get("action_horizon"), output.get("action_dim")
    if horizon is not None and dim is not None and horizon * dim > MAX_METADATA_ACTION_VALUES:
        raise ProtocolError(
            f"metadata announces {horizon} x {dim} action chunks, over the limit of "
            f"{MAX_METADATA_ACTION_VALUES} values"
        )
    spec = blocks["input"] if isinstance(blocks["input"], Mapping) else {}
    keys = spec.get("image_keys")
    if isinstance(keys, list | tuple) and len(keys) > MAX_METADATA_CAMERAS:
        raise ProtocolError(
            f"metadata announces {len(keys)} cameras, over the limit of {MAX_METADATA_CAMERAS}"
        )
    _check_image_size(spec.get("image_size"))


def _check_image_size(value: Any) -> None:
    """The announced frame size within bounds, in any of its forms (``224``, ``[H, W]``,
    ``[H, W, C]``, ``[C, H, W]``, ``{"height", "width"}``): its sides are its two largest
    entries, so their product bounds the frame whatever the form."""
    if value is None:
        return
    if isinstance(value, Mapping):
        entries: list[Any] = [value.get("height"), value.get("width")]
    elif isinstance(value, list | tuple):
        entries = list(value)
    else:
        entries = [value, value]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in entries):
        raise ProtocolError(f"metadata image_size {value!r} must be positive whole numbers")
    sides: list[int] = sorted(entries)[-2:]
    if len(sides) == 2 and sides[0] * sides[1] > MAX_METADATA_PIXELS:
        raise ProtocolError(
            f"metadata image_size {value!r} is over the limit of {MAX_METADATA_PIXELS} pixels"
        )


def read_metadata(document: Any) -> ActionMetadata:
    """`document` (the server's metadata) as `ActionMetadata`; `ProtocolError` when it is not
    an object, is out of bounds (`check_metadata_bounds`) or does not fit the model."""
    if not isinstance(document, Mapping):
        raise ProtocolError(
            f"the server's metadata is malformed: expected an object, got {type(document).__name__}"
        )
    check_metadata_bounds(document)
    try:
        return ActionMetadata.model_validate(document)
    except ValidationError as exc:
        raise ProtocolError(
            f"the server's metadata is malformed: {validation_message(exc, 'metadata')}"
        ) from None


ModelT = TypeVar("ModelT", bound=BaseModel)


def validate_block(model: type[ModelT], raw: Any, name: str) -> ModelT:
    """`raw` (the request's `name` block) as `model`, or a `CodecError` naming the bad field."""
    if not isinstance(raw, dict):
        raise CodecError(f"{name} must be an object", field=name)
    if not raw:  # the usual case; the defaults need no validating
        return model.model_construct()
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise CodecError(validation_message(exc, name)) from None


def validation_message(exc: ValidationError, root: str) -> str:
    """The first error of `exc`, as ``root.field: message``."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in (root, *first["loc"]))
    return f"{where}: {first['msg']}"

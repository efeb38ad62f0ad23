"""Decode action requests at the server's entrypoint: every image to an ndarray, at once.

Whatever form the images arrived in (base64 PNG/JPEG, pixel lists, tensor payloads, msgpack
arrays, flat openpi keys), `decode_request` makes every one a C-contiguous HxWx3 uint8 ndarray
before anything else touches the request. Nested pixel lists are millions of Python ints; one
ndarray costs almost nothing to hand to another process, so no Python object tree ever crosses a
process boundary. Every request SGLang's ``/v1/actions/generations`` accepts is accepted here;
what SGLang would turn into a 500 or a silent wrong answer is a `CodecError` naming the field.

Depth frames come apart from images, under ``depth`` (``input.observation.depth``, or a flat
request's top level): each becomes an HxW uint16 or float32 array (`decode_depth_value`), from
an array, a tensor payload or a 16-bit grey PNG, never converted.

The one exception, asked for with ``keep_jpeg``: a server whose policy decodes JPEG on its own
device (a GPU) gets each colour JPEG frame as the file's bytes, a 1-D uint8 array, checked
here (header, size limit, end marker) but not decoded.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from PIL import Image

from vla_client.codecs.arrays import pixel_list_to_array, tensor_payload_to_array
from vla_client.codecs.b64 import b64decode_text
from vla_client.codecs.depth import as_depth_frame, decode_depth_png
from vla_client.codecs.frames import as_rgb_frame
from vla_client.codecs.image_decode import DEFAULT_MAX_PIXELS, decode_image_bytes
from vla_client.codecs.parallel import map_frames
from vla_client.codecs.pre_encoded import PreEncoded
from vla_client.errors import CodecError, PayloadTooLargeError
from vla_client.protocol.limits import DecodeLimits
from vla_client.protocol.models import RuntimeOptions, SamplingParameters, validate_block
from vla_client.protocol.wire import Wire, loads, wire_for_content_type

FLAT_PARAMETER_KEYS = frozenset(
    {"action_horizon", "action_dim", "num_inference_steps", "seed", "guidance_scale",
     "guidance_scale_action", "output_format"}
)  # fmt: skip
"""Keys a flat (openpi-style) observation may carry as sampling parameters."""
_FLAT_IMAGE_PREFIXES = ("observation.images.", "images.", "observation/")
_STATE_KEYS = ("state", "observation.state", "observation/state")
_JPEG_START, _JPEG_END = b"\xff\xd8\xff", b"\xff\xd9"


@dataclass(frozen=True)
class DecodedRequest:
    """A request with every image an ndarray: what a server hands to its policy."""

    images: dict[str, np.ndarray]
    state: np.ndarray | None
    task: str
    request_id: str | None
    parameters: SamplingParameters
    runtime: RuntimeOptions
    wire: Wire
    flat: bool = False
    capture_times: dict[str, float] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    depth: dict[str, np.ndarray] = field(default_factory=dict)
    """Depth frames by camera name, HxW uint16 or float32 (`decode_depth_value`)."""

    @property
    def output_format(self) -> Literal["list", "numpy"]:
        """runtime, then parameters, then the wire's default (numpy for msgpack)."""
        chosen = self.runtime.output_format or self.parameters.output_format
        return chosen or ("numpy" if self.wire == "msgpack" else "list")


def decode_request(
    body: bytes | memoryview,
    content_type: str | None,
    *,
    limits: DecodeLimits | None = None,
    keep_jpeg: bool = False,
) -> DecodedRequest:
    """Parse a request body and decode every image to an ndarray (colour JPEG frames kept as
    their bytes with `keep_jpeg`). Raises `CodecError`."""
    wire = wire_for_content_type(content_type)
    payload = loads(body, wire, base64_bytes=True)
    return decode_payload(payload, wire, limits=limits, keep_jpeg=keep_jpeg)


def decode_payload(
    payload: Any, wire: Wire, *, limits: DecodeLimits | None = None, keep_jpeg: bool = False
) -> DecodedRequest:
    """`decode_request` for an already parsed document (websocket messages arrive this way)."""
    limits = limits or DecodeLimits()
    if not isinstance(payload, dict):
        raise CodecError(
            f"request must be a JSON object or msgpack map, got {type(payload).__name__}"
        )
    flat = "input" not in payload
    if flat:
        observation, prefix = dict(payload), ""
        task: Any = None
        parameters_raw: Any = {k: payload[k] for k in FLAT_PARAMETER_KEYS if k in payload}
        runtime_raw: Any = {}
    else:
        observation, task = _unwrap_input(payload["input"])
        prefix = "input.observation."
        parameters_raw = _or_empty(payload.get("parameters"))
        runtime_raw = _runtime(payload)
    task = _task(observation, task)
    images = _decode_images(_pop_images(observation, prefix, limits), limits, keep_jpeg)
    depth = _decode_depth(observation.pop("depth", None), prefix, limits)
    state = _decode_state(observation, prefix)
    capture_times = _capture_times(observation.pop("capture_times", None), prefix)
    return DecodedRequest(
        images=images,
        state=state,
        task=task,
        request_id=_request_id(payload),
        parameters=validate_block(SamplingParameters, parameters_raw, "parameters"),
        runtime=validate_block(RuntimeOptions, runtime_raw, "runtime"),
        wire=wire,
        flat=flat,
        capture_times=capture_times,
        extras={k: v for k, v in observation.items() if k not in FLAT_PARAMETER_KEYS},
        depth=depth,
    )


def _task(observation: dict[str, Any], task: Any) -> str:
    """The instruction: `task` (the action API's ``input.task``), else the observation's
    ``prompt`` or ``task`` (removed from it), else empty."""
    if task is None:
        task = observation.pop("prompt", None) or observation.pop("task", None) or ""
    if not isinstance(task, str):
        raise CodecError("task must be a string", field="input.task")
    return task


def _runtime(payload: dict[str, Any]) -> Any:
    """The request's runtime block, with a top-level ``return_timing`` merged in (the block's
    own wins)."""
    runtime_raw = _or_empty(payload.get("runtime"))
    if not isinstance(runtime_raw, dict):
        raise CodecError("runtime must be an object", field="runtime")
    if "return_timing" in payload and "return_timing" not in runtime_raw:
        runtime_raw = {**runtime_raw, "return_timing": payload["return_timing"]}
    return runtime_raw


def _unwrap_input(value: Any) -> tuple[dict[str, Any], Any]:
    if not isinstance(value, dict):
        raise CodecError("input must be an object", field="input")
    observation = _or_empty(value.get("observation"))
    if not isinstance(observation, dict):
        raise CodecError("observation must be an object", field="input.observation")
    observation = dict(observation)
    for key in ("images", "state", "noise", "image"):
        if value.get(key) is not None:
            observation[key] = value[key]
    task = value.get("task")
    return observation, task if task is not None else value.get("prompt")


def _or_empty(value: Any) -> Any:
    return {} if value is None else value


def _pop_images(
    observation: dict[str, Any], prefix: str, limits: DecodeLimits
) -> dict[str, tuple[str, Any]]:
    """Camera name -> (field path, wire value), removed from `observation`."""
    found = _pop_image_map(observation, prefix)
    _pop_flat_images(observation, prefix, found)
    single = observation.pop("image", None)
    if isinstance(single, list) and single and _looks_like_image(single[0]):
        found.update({f"image_{i}": (f"{prefix}image.{i}", v) for i, v in enumerate(single)})
    elif single is not None:
        found["image"] = (f"{prefix}image", single)
    if len(found) > limits.max_cameras:
        raise PayloadTooLargeError(
            f"{len(found)} cameras, over the limit of {limits.max_cameras}", field=f"{prefix}images"
        )
    return found


def _pop_image_map(observation: dict[str, Any], prefix: str) -> dict[str, tuple[str, Any]]:
    """The ``images`` object's cameras (name -> (field path, wire value)), removed."""
    found: dict[str, tuple[str, Any]] = {}
    images = observation.pop("images", None)
    if images is not None:
        if not isinstance(images, dict):
            raise CodecError(
                "images must be an object keyed by camera name", field=f"{prefix}images"
            )
        for name, value in images.items():
            found[str(name)] = (f"{prefix}images.{name}", value)
    return found


def _pop_flat_images(
    observation: dict[str, Any], prefix: str, found: dict[str, tuple[str, Any]]
) -> None:
    """Add to `found` the cameras under flat keys (``observation.images.NAME``,
    ``images.NAME``, ``observation/NAME`` holding an image), removed from `observation`."""
    for key in [
        k for k in observation if isinstance(k, str) and k.startswith(_FLAT_IMAGE_PREFIXES)
    ]:
        if key.startswith("observation/") and not _looks_like_image(observation[key]):
            continue
        name = key.split("/", 1)[1] if key.startswith("observation/") else key.rsplit(".", 1)[1]
        found[name] = (prefix + key, observation.pop(key))


def _looks_like_image(value: Any) -> bool:
    return isinstance(value, dict | bytes) or (
        isinstance(value, np.ndarray) and value.ndim in (2, 3)
    )


def _decode_images(
    values: dict[str, tuple[str, Any]], limits: DecodeLimits, keep_jpeg: bool
) -> dict[str, np.ndarray]:
    def decode(name: str) -> np.ndarray:
        where, value = values[name]
        kept = kept_jpeg(value, where, limits.max_image_pixels) if keep_jpeg else None
        if kept is not None:
            return kept
        return decode_image_value(value, field=where, max_pixels=limits.max_image_pixels)

    names = list(values)
    # Only encoded images (bytes, base64 text) decode without the GIL; for arrays and lists
    # the hop to a thread and back costs more than it could save.
    if any(_is_encoded(value) for _, value in values.values()):
        return dict(zip(names, map_frames(decode, names), strict=True))
    return {name: decode(name) for name in names}


def _is_encoded(value: Any) -> bool:
    """Whether an image value is encoded bytes: raw bytes (msgpack) or base64 text (a string,
    or its ASCII bytes) in a ``{"b64_json": ...}`` / ``{"base64": ...}`` payload."""
    if isinstance(value, dict):
        return isinstance(value.get("b64_json", value.get("base64")), str | bytes)
    return isinstance(value, bytes | str)


def kept_jpeg(value: Any, where: str, max_pixels: int) -> np.ndarray | None:
    """A colour JPEG image value as its bytes (a read-only 1-D uint8 array), its header and end
    checked; None for anything else (decoded as usual, which reports what is wrong with it)."""
    data = _image_bytes(value, where)
    if data is None or not data.startswith(_JPEG_START):
        return None
    try:
        with Image.open(io.BytesIO(data)) as image:  # reads the header, decodes nothing
            width, height = image.size
            colour = image.format == "JPEG" and image.mode == "RGB"
    except Exception:  # not a JPEG after all: the usual decode says why
        return None
    if not colour:
        return None
    if width * height > max_pixels:
        raise PayloadTooLargeError(
            f"image has {width * height} pixels, over the limit of {max_pixels}", field=where
        )
    if _JPEG_END not in data[-64:]:
        raise CodecError("truncated JPEG (no end-of-image marker)", field=where)
    return np.frombuffer(data, np.uint8)


def _image_bytes(value: Any, where: str) -> bytes | None:
    """An image value's file bytes: base64 in a map, or bytes as they came; None otherwise."""
    if isinstance(value, dict):
        encoded = value.get("b64_json", value.get("base64"))
        return b64decode_text(encoded, field=where) if isinstance(encoded, str | bytes) else None
    return bytes(value) if isinstance(value, bytes | bytearray | memoryview) else None


def _decode_depth(value: Any, prefix: str, limits: DecodeLimits) -> dict[str, np.ndarray]:
    """The ``depth`` object's frames by camera name; none when absent."""
    if value is None:
        return {}
    where = f"{prefix}depth"
    if not isinstance(value, dict):
        raise CodecError("depth must be an object keyed by camera name", field=where)
    if len(value) > limits.max_cameras:
        raise PayloadTooLargeError(
            f"{len(value)} depth cameras, over the limit of {limits.max_cameras}", field=where
        )
    return {
        str(name): decode_depth_value(
            frame, field=f"{where}.{name}", max_pixels=limits.max_image_pixels
        )
        for name, frame in value.items()
    }


def decode_depth_value(
    value: Any, *, field: str | None = None, max_pixels: int = DEFAULT_MAX_PIXELS
) -> np.ndarray:
    """One depth frame as a C-contiguous HxW uint16 or float32 array: an ndarray (msgpack), a
    tensor payload ``{values|data, dtype, shape}`` or a 16-bit grey PNG (``{"b64_json": ...}``
    or, on msgpack, its bytes). A pixel list (no dtype), a JPEG, an 8-bit PNG or another dtype
    is a `CodecError` naming what depth takes."""
    if isinstance(value, PreEncoded):
        value = loads(value.data, value.wire)
    data = _image_bytes(value, field or "depth")
    if data is not None:
        return decode_depth_png(data, max_pixels=max_pixels, field=field)
    if isinstance(value, dict) and any(value.get(k) is not None for k in ("values", "data")):
        value = tensor_payload_to_array(value, field=field)
    if not isinstance(value, np.ndarray):
        raise CodecError(
            f"a depth frame is an array, a tensor payload with its dtype or a 16-bit PNG, "
            f"got {type(value).__name__}",
            field=field,
        )
    _check_array_pixels(value, max_pixels, field)
    return as_depth_frame(value, field=field)


def _decode_state(observation: dict[str, Any], prefix: str) -> np.ndarray | None:
    for key in _STATE_KEYS:
        value = observation.pop(key, None)
        if value is None:
            continue
        field_name = prefix + key
        if isinstance(value, dict):
            value = tensor_payload_to_array(value, field=field_name)
        if isinstance(value, np.ndarray) and value.dtype == np.float32:  # msgpack's: as it is
            state = value.reshape(-1)
        else:
            state = _float32_state(value, field_name)
        if not np.isfinite(state).all():
            raise CodecError("state contains NaN or infinity", field=field_name)
        return state
    return None


def _float32_state(value: Any, field_name: str) -> np.ndarray:
    """A state of numbers (a list, an array of another dtype) as a flat float32 array."""
    try:
        with np.errstate(over="ignore"):  # too-large values become inf, refused by the caller
            return np.asarray(value, dtype=np.float32).reshape(-1)
    except (ValueError, TypeError, OverflowError):
        raise CodecError("state must be a list of numbers", field=field_name) from None


def _capture_times(value: Any, prefix: str) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(t, int | float) and not isinstance(t, bool) for t in value.values()
    ):
        raise CodecError(
            "capture_times must map camera names to seconds", field=f"{prefix}capture_times"
        )
    try:
        times = {str(k): float(v) for k, v in value.items()}
        finite = all(math.isfinite(t) for t in times.values())
    except OverflowError:  # an integer too large for a float, which a JSON body may hold
        finite = False
    if not finite:  # msgpack carries NaN and infinity; an age from one means nothing
        raise CodecError(
            "capture_times must be finite seconds (no NaN or infinity)",
            field=f"{prefix}capture_times",
        )
    return times


def _request_id(payload: dict[str, Any]) -> str | None:
    value = payload.get("request_id")
    if value is None:
        value = payload.get("id")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise CodecError("request_id must be a string", field="request_id")
    return str(value)


def decode_image_value(
    value: Any, *, field: str | None = None, max_pixels: int = DEFAULT_MAX_PIXELS
) -> np.ndarray:
    """Decode any accepted image form to a C-contiguous HxWx3 uint8 RGB array."""
    if isinstance(value, PreEncoded):
        return decode_image_value(loads(value.data, value.wire), field=field, max_pixels=max_pixels)
    if isinstance(value, np.ndarray):
        return _frame(value, max_pixels, field)
    if isinstance(value, dict):
        return _image_of_map(value, field=field, max_pixels=max_pixels)
    if isinstance(value, list | tuple):
        converted = pixel_list_to_array(value)
        if not isinstance(converted, np.ndarray):
            raise CodecError(
                "pixel list is ragged, non-numeric or not [H][W][C] nested lists", field=field
            )
        return _frame(converted, max_pixels, field)
    if isinstance(value, bytes | bytearray | memoryview):
        return decode_image_bytes(bytes(value), max_pixels=max_pixels, field=field)
    if isinstance(value, str):
        raise CodecError(
            "image is a string; send {'b64_json': ...}, pixels or an array "
            "(the server does not open paths or URLs)",
            field=field,
        )
    raise CodecError(f"unsupported image value of type {type(value).__name__}", field=field)


def _image_of_map(value: dict[str, Any], *, field: str | None, max_pixels: int) -> np.ndarray:
    """An image given as a map: base64 (``b64_json`` or ``base64``) of an image file, or a
    tensor payload (``values`` or ``data``)."""
    encoded = value.get("b64_json")
    if encoded is None:
        encoded = value.get("base64")
    if encoded is not None or "b64_json" in value or "base64" in value:
        data = b64decode_text(encoded if encoded is not None else "", field=field)
        return decode_image_bytes(data, max_pixels=max_pixels, field=field)
    if value.get("values") is None and value.get("data") is None:
        raise CodecError(
            "unrecognised image payload: expected b64_json, base64, values or data",
            field=field,
        )
    return _frame(tensor_payload_to_array(value, field=field), max_pixels, field)


def _frame(array: np.ndarray, max_pixels: int, field: str | None) -> np.ndarray:
    """`array`, within `max_pixels`, as a C-contiguous HxWx3 uint8 RGB frame."""
    _check_array_pixels(array, max_pixels, field)
    return as_rgb_frame(array, field=field)


def _check_array_pixels(array: np.ndarray, max_pixels: int, field: str | None) -> None:
    pixels = array.shape[0] * array.shape[1] if array.ndim >= 2 else array.size
    if pixels > max_pixels:
        raise PayloadTooLargeError(
            f"image has {pixels} pixels, over the limit of {max_pixels}", field=field
        )

"""Action replies, read on the robot: whatever came back, to a document, actions or an error.

A reply is one of three documents. The envelope (the default)::

    {"id": "act_...", "object": "action.generation", "created": <unix s>, "model": "...",
     "data": [{"index": 0, "input_index": 0, "candidate_index": 0,
               "action": {"type": "continuous", "dtype": "float32", "shape": [H, D],
                          "values": [[...]] or an ndarray}}, ...one entry per batch element],
     "usage": {"batch_size", "action_horizon", "action_dim", "denoise_steps",
               "prefix_cache_hit"},
     "timings"?: {"preprocess_ms", ...}, "digests"?: {camera: {"shape", "dtype", "sha256"}}}

The raw form (``runtime.response_format: "raw"``), which is also what openpi's websocket
answers: ``{"request_id", "actions": [H, D], "parameters": {...}, "timings"?}``. And an error
(see `vla_client.protocol.status`). `read_reply` turns whatever came back into a document or the
matching error, `read_actions` takes the chunk out of either success form, so one client works
against every server that speaks the API; `reply_size_limit` caps what a client reads at all.
The reference server builds the two success forms with `vla_client.server.wire.reply_build`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from vla_client.errors import CodecError, ProtocolError, ServerError
from vla_client.protocol.metadata_fields import check_metadata_bounds
from vla_client.protocol.status import parse_retry_after, redirect_detail
from vla_client.protocol.wire import MSGPACK_CONTENT_TYPE, loads, wire_for_content_type


@dataclass(frozen=True)
class Reply:
    """One reply as a transport received it: status, content type, body bytes and headers.

    A websocket frame becomes a reply too: a binary frame is a 200 in msgpack, a text frame an
    error whose status the connection's close code gave.
    """

    status: int
    content_type: str
    content: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


REPLY_SIZE_FLOOR = 1 << 20
"""Least reply size cap (bytes): metadata, errors and a small chunk with its timings and
digests fit many times over."""
BYTES_PER_ACTION_VALUE = 64
"""Room per announced action value in the automatic reply cap: a float as JSON text is at most
about 25 bytes, and the envelope, candidates and digests get the rest."""


def reply_size_limit(metadata: Any) -> int:
    """The reply size cap for a server announcing `metadata`: room for its chunk (``horizon x
    dim``, the padded dim when larger) at `BYTES_PER_ACTION_VALUE` bytes a value, at least
    `REPLY_SIZE_FLOOR`. Metadata that announces no sizes, or sizes out of bounds (the client
    refuses those on reading, a padded chunk over the limit among them), gets the floor."""
    output = metadata.get("output") if isinstance(metadata, Mapping) else None
    if not isinstance(output, Mapping):
        return REPLY_SIZE_FLOOR
    try:
        check_metadata_bounds({"output": output})
    except ProtocolError:
        return REPLY_SIZE_FLOOR
    horizon: int | None = output.get("action_horizon")
    dim: int = max(output.get("action_dim") or 0, output.get("padded_action_dim") or 0)
    if not horizon or not dim:
        return REPLY_SIZE_FLOOR
    return max(REPLY_SIZE_FLOOR, horizon * dim * BYTES_PER_ACTION_VALUE)


def read_reply(reply: Reply, *, request_id: str | None = None) -> Any:
    """The parsed document of a successful reply; raises for every kind of failure.

    `ServerError` for an error status (with the server's ``detail`` and ``Retry-After``) or a
    websocket error map; `ProtocolError` for a body that cannot be parsed. `request_id` is the
    request the reply answers, carried by the error. A redirect (3xx) is a `ServerError` saying
    where it pointed: it is not followed.
    """
    if 300 <= reply.status < 400:
        raise ServerError(
            reply.status,
            redirect_detail(reply.status, reply.headers.get("location")),
            request_id=request_id,
        )
    if reply.status >= 400:
        raise ServerError(
            reply.status,
            _detail(reply),
            retry_after=parse_retry_after(reply.headers.get("retry-after")),
            request_id=request_id,
        )
    try:
        wire = wire_for_content_type(reply.content_type or MSGPACK_CONTENT_TYPE)
        document = loads(reply.content, wire)
    except CodecError as exc:
        raise ProtocolError(
            f"cannot read the server's reply: {exc}", request_id=request_id
        ) from None
    if isinstance(document, dict) and "error" in document and not _has_actions(document):
        status = document.get("status")
        raise ServerError(
            status if isinstance(status, int) and 400 <= status < 600 else 500,
            str(document["error"]),
            retry_after=parse_retry_after(document.get("retry_after")),
            request_id=request_id,
        )
    return document


def _has_actions(document: dict[Any, Any]) -> bool:
    return "actions" in document or "data" in document


def _detail(reply: Reply) -> str:
    """The message of a JSON error body, else the body as text: its ``detail`` (FastAPI's, the
    reference server's), or its ``error`` (SGLang's action server answers 503
    ``{"error": message}`` while it warms up or after its scheduler failed), a string or an
    object's ``message`` (OpenAI's form)."""
    text = reply.content.decode("utf-8", "replace").strip()
    try:
        document = orjson.loads(reply.content)
    except orjson.JSONDecodeError:
        return text or f"HTTP {reply.status}"
    if not isinstance(document, dict):
        return text or f"HTTP {reply.status}"
    for key in ("detail", "error"):
        detail = document.get(key)
        if isinstance(detail, dict) and isinstance(detail.get("message"), str):
            detail = detail["message"]
        if detail is not None:
            return detail if isinstance(detail, str) else orjson.dumps(detail).decode()
    return text or f"HTTP {reply.status}"


def read_actions(reply: Any) -> tuple[np.ndarray, str | None]:
    """The float32 action array and request id from an envelope, raw or openpi reply.

    Actions must be numbers (ints or floats, as lists or a numeric ndarray): strings, booleans
    and None are a `ProtocolError`, as are values a float32 cannot hold and envelope entries of
    different shapes. The request id is None when the reply carries none (openpi's replies).
    """
    if not isinstance(reply, dict):
        raise ProtocolError(f"reply must be an object, got {type(reply).__name__}")
    if "data" in reply:
        actions = _envelope_actions(reply["data"])
        request_id = reply.get("id")
    elif "actions" in reply:
        actions = _as_float32(reply["actions"])
        request_id = reply.get("request_id")
    else:
        raise ProtocolError(
            f"reply has neither 'data' nor 'actions' (keys: {sorted(map(str, reply))})"
        )
    if actions.ndim not in (2, 3) or 0 in actions.shape:
        raise ProtocolError(f"actions must be [H, D] or [B, H, D], got shape {actions.shape}")
    return actions, None if request_id is None else str(request_id)


def _envelope_actions(data: Any) -> np.ndarray:
    """The actions of an envelope's ``data`` entries: one chunk, or a batch of chunks of one
    shape."""
    if not isinstance(data, list) or not data:
        raise ProtocolError("envelope has no data entries")
    try:
        chunks = [_as_float32(entry["action"]["values"]) for entry in data]
    except (KeyError, TypeError) as exc:
        raise ProtocolError(f"envelope entry lacks action values: {exc}") from None
    shapes = sorted({chunk.shape for chunk in chunks})
    if len(shapes) > 1:
        raise ProtocolError(f"envelope entries differ in shape: {shapes}")
    return chunks[0] if len(chunks) == 1 else np.stack(chunks)


_NUMERIC_KINDS = "iuf"
"""numpy dtype kinds of action values: signed and unsigned integers, floats."""


def _as_float32(values: Any) -> np.ndarray:
    """`values` as float32, refusing anything but numbers (numpy would convert ``"nan"`` and
    ``True``)."""
    if isinstance(values, np.ndarray):
        array = values
    elif isinstance(values, list):
        _check_numbers(values)
        try:
            array = np.asarray(values, dtype=np.float64)
        except (ValueError, TypeError, OverflowError) as exc:
            raise ProtocolError(f"actions are not a numeric array: {exc}") from None
    else:
        raise ProtocolError(f"actions must be a list or an array, got {type(values).__name__}")
    if array.dtype.kind not in _NUMERIC_KINDS:
        raise ProtocolError(f"actions must be numbers, got dtype {array.dtype}")
    if array.dtype == np.float32:  # a msgpack reply's: a copy, and nothing can overflow
        return array.astype(np.float32)
    with np.errstate(over="ignore"):
        actions = array.astype(np.float32)
    if np.isinf(actions).any() and not np.isinf(array[np.isinf(actions)]).all():
        raise ProtocolError("actions hold values beyond float32's range")
    return actions


def _check_numbers(values: list[Any]) -> None:
    """`ProtocolError` unless every leaf of the nested lists is an int or a float."""
    stack: list[Any] = [values]
    while stack:
        for item in stack.pop():
            if isinstance(item, list):
                stack.append(item)
            elif isinstance(item, np.ndarray):
                if item.dtype.kind not in _NUMERIC_KINDS:
                    raise ProtocolError(f"actions must be numbers, got dtype {item.dtype}")
            elif isinstance(item, bool) or not isinstance(item, int | float | np.number):
                raise ProtocolError(
                    f"actions must be numbers, got {type(item).__name__} {item!r:.40}"
                )

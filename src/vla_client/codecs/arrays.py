"""Arrays written as JSON: nested pixel lists and ``{values|data, dtype, shape}`` tensor payloads.

`pixel_list_to_array` reproduces the conversion SGLang's entrypoint applies to pixel lists,
outcome for outcome (so a list SGLang accepts is accepted here, as the same array):
``image.tolist()`` of a uint8 image becomes a uint8 array
through one C-level ``bytes(chain(...))`` pass; other numeric lists fall back to ``np.asarray``;
anything irregular (ragged, non-numeric, bool-first, huge ints) is returned unchanged, for the
caller to refuse.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np

from vla_client.errors import CodecError


def pixel_list_to_array(value: Any) -> Any:
    """Nested ``[H][W][C]`` list to an ndarray, or `value` unchanged when it is not one."""
    try:
        first = value[0][0][0]
    except (TypeError, IndexError, KeyError):
        return value
    if isinstance(first, bool) or not isinstance(first, int | float):
        return value
    if isinstance(first, int):
        rows = value
        height, width, channels = len(rows), len(rows[0]), len(rows[0][0])
        if all(isinstance(row, list | tuple) and len(row) == width for row in rows):
            try:
                flat = bytes(chain.from_iterable(chain.from_iterable(rows)))
            except (TypeError, ValueError):
                flat = None
            # The right total can still hide ragged pixels ([1, 2], [3, 4, 5] ...): each is checked.
            if (
                flat is not None
                and len(flat) == height * width * channels
                and set(map(len, chain.from_iterable(rows))) == {channels}
            ):
                return np.frombuffer(flat, dtype=np.uint8).reshape(height, width, channels)
    try:
        array = np.asarray(value)
    except (ValueError, TypeError, OverflowError):
        return value
    return array if array.dtype.kind in "iuf" else value


def tensor_payload_to_array(payload: dict[str, Any], *, field: str | None = None) -> np.ndarray:
    """Decode ``{"values" | "data": ..., "dtype"?: str, "shape"?: [...]}`` to an ndarray."""
    values = payload.get("values")
    if values is None:
        values = payload.get("data")
    if values is None:
        raise CodecError("tensor payload needs 'values' or 'data'", field=field)
    dtype = _dtype(payload.get("dtype"), field)
    try:
        if isinstance(values, bytes | bytearray | memoryview):
            array = np.frombuffer(values, dtype=dtype or np.uint8)
        elif isinstance(values, np.ndarray):  # a list the JSON reader took as uint8 already
            array = _cast_exact(values, dtype)
        elif dtype == np.uint8 and isinstance(values, list):
            array = _uint8_list_to_array(values)
        else:
            array = np.asarray(values, dtype=dtype)
    except (ValueError, TypeError, OverflowError) as exc:
        raise CodecError(
            f"tensor values are ragged, non-numeric or out of range: {exc}", field=field
        ) from None
    if array.dtype.kind not in "biuf":
        raise CodecError(f"tensor values must be numeric, got {array.dtype}", field=field)
    shape = payload.get("shape")
    if shape is not None:
        if not isinstance(shape, list | tuple) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in shape
        ):
            raise CodecError(f"tensor shape must be a list of ints, got {shape!r}", field=field)
        try:
            array = array.reshape(shape)
        except ValueError:
            raise CodecError(
                f"cannot reshape {array.size} values to shape {list(shape)}", field=field
            ) from None
    return array


def _cast_exact(values: np.ndarray, dtype: np.dtype[Any] | None) -> np.ndarray:
    """``np.asarray(values.tolist(), dtype)``, refusing what it refuses: without a dtype, JSON
    ints become the platform's default int, as a list of them would."""
    dtype = dtype or np.dtype(np.int_)
    if dtype == values.dtype:
        return values
    if dtype.kind in "iu" and values.size and values.max() > np.iinfo(dtype).max:
        raise ValueError(f"{values.max()} is out of bounds for {dtype}")
    return values.astype(dtype)


def _uint8_list_to_array(values: list[Any]) -> np.ndarray:
    """A flat list of ints in 0..255 through one C-level `bytes()` call, like the pixel path."""
    try:
        return np.frombuffer(bytes(values), dtype=np.uint8)
    except (TypeError, ValueError):
        return np.asarray(values, dtype=np.uint8)


def _dtype(name: Any, field: str | None) -> np.dtype[Any] | None:
    if name is None:
        return None
    if not isinstance(name, str):
        raise CodecError(f"dtype must be a string, got {name!r}", field=field)
    try:
        dtype = np.dtype(name)
    except (TypeError, ValueError, SyntaxError):  # numpy parses some strings as Python literals
        raise CodecError(f"unknown dtype {name!r}", field=field) from None
    if dtype.kind not in "biuf":
        raise CodecError(f"dtype {name!r} is not numeric", field=field)
    return dtype

"""msgpack with numpy arrays, in the wire format of openpi and SGLang.

An array travels as a map ``{b"__ndarray__": True, b"data": <raw bytes>, b"dtype": "<f4",
b"shape": [...]}`` and a numpy scalar as ``{b"__npgeneric__": True, b"data": x, b"dtype": ...}``.
Keys are packed as bytes (what openpi-client looks for) and read back as bytes or str (what
clients in other languages send). Only bool, integer and float dtypes cross the wire: object,
void and complex are refused both ways, so nothing here can be made to run pickle.

Unpacked arrays are read-only views of the received bytes, not copies.
"""

from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np

from vla_client.errors import CodecError

CONTENT_TYPE = "application/msgpack"
_ALLOWED_KINDS = frozenset("biuf")


def packb(obj: Any) -> bytes:
    """Pack `obj` (dicts, lists, scalars, bytes, numpy arrays and scalars) to msgpack bytes."""
    try:
        packed: bytes = msgpack.packb(obj, default=_pack_default, use_bin_type=True)
    except (TypeError, ValueError) as exc:
        raise CodecError(f"cannot pack to msgpack: {exc}") from None
    return packed


def unpackb(data: bytes | memoryview) -> Any:
    """Unpack msgpack bytes; numpy maps become arrays and scalars. Raises `CodecError`."""
    try:
        return msgpack.unpackb(data, object_hook=_unpack_hook, raw=False, strict_map_key=False)
    except CodecError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise CodecError(f"malformed msgpack body: {exc}") from None


def _check_dtype(dtype: np.dtype[Any]) -> None:
    if dtype.kind not in _ALLOWED_KINDS:
        raise CodecError(f"Unsupported dtype: {dtype} (only bool, integer and float arrays)")


def _pack_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        _check_dtype(obj.dtype)
        # Not np.ascontiguousarray: it turns a 0-d array into shape (1,).
        contiguous = obj if obj.flags.c_contiguous else obj.copy(order="C")
        return {
            b"__ndarray__": True,
            b"data": contiguous.data.cast("B") if contiguous.size else b"",
            b"dtype": contiguous.dtype.str,
            b"shape": list(contiguous.shape),
        }
    if isinstance(obj, np.generic):
        _check_dtype(obj.dtype)
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"cannot serialize {type(obj).__name__}")


def _get(obj: dict[Any, Any], key: str) -> Any:
    value = obj.get(key)
    return obj.get(key.encode()) if value is None else value


def _unpack_hook(obj: dict[Any, Any]) -> Any:
    if _get(obj, "__ndarray__"):
        return _unpack_array(obj)
    if _get(obj, "__npgeneric__"):
        dtype = _dtype(_get(obj, "dtype"))
        try:
            return dtype.type(_get(obj, "data"))
        except (TypeError, ValueError, OverflowError) as exc:
            raise CodecError(f"bad numpy scalar: {exc}") from None
    return obj


def _dtype(name: Any) -> np.dtype[Any]:
    if isinstance(name, bytes):
        name = name.decode("ascii", "replace")
    if not isinstance(name, str):
        raise CodecError(f"ndarray dtype must be a string, got {type(name).__name__}")
    try:
        dtype = np.dtype(name)
    except (TypeError, ValueError, SyntaxError):  # numpy parses some strings as Python literals
        raise CodecError(f"unknown dtype {name!r}") from None
    _check_dtype(dtype)
    return dtype


def _unpack_array(obj: dict[Any, Any]) -> np.ndarray:
    dtype = _dtype(_get(obj, "dtype"))
    shape = _get(obj, "shape")
    data = _get(obj, "data")
    if not isinstance(shape, list | tuple) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        raise CodecError(f"ndarray shape must be a list of non-negative ints, got {shape!r}")
    if not isinstance(data, bytes | bytearray):
        raise CodecError("ndarray data must be binary")
    expected = math.prod(shape) * dtype.itemsize
    if len(data) != expected:
        raise CodecError(
            f"ndarray data has {len(data)} bytes, shape {list(shape)} of {dtype} needs {expected}"
        )
    return np.ndarray(buffer=data, dtype=dtype, shape=tuple(shape))

"""msgpack with numpy arrays, in the wire format of openpi and SGLang.

An array travels as a map ``{b"__ndarray__": True, b"data": <raw bytes>, b"dtype": "<f4",
b"shape": [...]}`` and a numpy scalar as ``{b"__npgeneric__": True, b"data": x, b"dtype": ...}``.
Keys are packed as bytes (what openpi-client looks for) and read back as bytes or str (what
clients in other languages send). Only bool, integer and float dtypes cross the wire: object,
void and complex are refused both ways, so nothing here can be made to run pickle.

Unpacked arrays are read-only views of the buffer passed to `unpackb`, not copies. msgpack
copies every binary value it returns, so the maps near the top of a document are walked item by
item: an array's data is sliced out of the input, and only the other values go through msgpack.
A server that reads a body into shared memory therefore gets frames that already lie there.
Pixel lists (``frame.tolist()``) in those maps are read by numpy, never as Python ints.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import msgpack
import msgspec
import numpy as np

from vla_client.codecs.pixel_msgpack import read_nested_list
from vla_client.codecs.pre_encoded import PreEncoded
from vla_client.errors import CodecError

CONTENT_TYPE = "application/msgpack"
VIEW_MIN_BYTES = 16 * 1024  # smaller values are copied: a copy is cheaper than splitting
_ALLOWED_KINDS = frozenset("biuf")
_WALK_DEPTH = 6  # images sit at depth 5 (input.observation.images.<cam>.data); deeper: msgpack
_WALK_MAX_PAIRS = 256  # wider maps are not where frames travel: msgpack unpacks them at once
_BIN_HEADER_BYTES = {0xC4: 2, 0xC5: 3, 0xC6: 5}  # bin 8/16/32: format byte, then the length
_ARRAY_KINDS = frozenset({*range(0x90, 0xA0), 0xDC, 0xDD})
_FEED_BYTES = 4096  # what the unpacker is first fed for a value; doubled while it needs more
T = TypeVar("T")


def packb(obj: Any) -> bytes:
    """Pack `obj` (dicts, lists, scalars, bytes, numpy arrays and scalars) to msgpack bytes.

    msgspec writes the same bytes as ``msgpack.packb(..., use_bin_type=True)`` in about half
    the time.
    """
    try:
        return _ENCODER.encode(obj)
    except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: ints over 64 bits
        raise CodecError(f"cannot pack to msgpack: {exc}") from None


def unpackb(data: bytes | bytearray | memoryview) -> Any:
    """Unpack msgpack bytes; numpy maps become arrays and scalars. Raises `CodecError`.

    Arrays of `VIEW_MIN_BYTES` or more in the maps near the top of the document (not in lists)
    are read-only views of `data`, which must then not change while they are in use. In those
    maps a nested list of uint8 ints (``frame.tolist()``) comes back as an HxWxC uint8 array,
    read by numpy (`pixel_msgpack`), not as lists of Python ints.
    """
    try:
        if len(data) < VIEW_MIN_BYTES:
            return _unpack(data)
        return _Walk(memoryview(data).cast("B").toreadonly()).document()
    except CodecError:
        raise
    except (RecursionError, msgpack.StackError):  # values nested thousands of levels deep
        raise CodecError("malformed msgpack body: values nested too deep") from None
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise CodecError(f"malformed msgpack body: {exc}") from None


def _unpack(data: bytes | bytearray | memoryview) -> Any:
    return msgpack.unpackb(data, object_hook=_unpack_hook, raw=False, strict_map_key=False)


class _Walk:
    """Decode a document, walking the maps near its top item by item.

    msgpack's own unpacker reads the values, except two kinds in those maps: a binary value of
    `VIEW_MIN_BYTES` or more comes back as a slice of the input (kept only where it is array
    data), and a regular pixel list as an array read by numpy. Everything else (other lists,
    scalars, deep or wide maps) is unpacked by msgpack in one call.

    The unpacker copies what it is fed into a buffer of its own, so it is fed the document a
    piece at a time, as far as the value it reads needs, and never the frames it steps over:
    for three 360x640 frames that is a few kilobytes copied instead of 2 MB. Positions in the
    document are the unpacker's (`tell`) plus the bytes it was never fed.
    """

    def __init__(self, encoded: memoryview) -> None:
        self.encoded = encoded
        self.unpacker = msgpack.Unpacker(
            object_hook=_unpack_hook, raw=False, strict_map_key=False,
            max_buffer_size=max(len(encoded), 1),
        )  # fmt: skip
        self.fed = 0
        """Bytes of `encoded` fed to the unpacker or stepped over."""
        self.stepped_over = 0
        """Bytes of `encoded` the unpacker never saw (the frames)."""

    def document(self) -> Any:
        value = self.value(0)
        if self.position() != len(self.encoded):
            raise CodecError("malformed msgpack body: data after the document")
        return value

    def position(self) -> int:
        """Where in `encoded` the next value starts."""
        position: int = self.unpacker.tell() + self.stepped_over
        return position

    def value(self, depth: int) -> Any:
        at = self.position()
        if at >= len(self.encoded):
            raise msgpack.OutOfData("truncated")
        kind = self.encoded[at]
        if depth > 0 and kind in _BIN_HEADER_BYTES:
            header = _BIN_HEADER_BYTES[kind]
            size = int.from_bytes(self.encoded[at + 1 : at + header], "big")
            if size >= VIEW_MIN_BYTES and at + header + size <= len(self.encoded):
                self.step_over(at, header + size)
                return self.encoded[at + header : at + header + size]
        if depth > 0 and kind in _ARRAY_KINDS and len(self.encoded) - at >= VIEW_MIN_BYTES:
            found = read_nested_list(self.encoded, at)
            if found is not None:
                pixels, end = found
                self.step_over(at, end - at)
                return pixels
        if depth < _WALK_DEPTH and 0 < self.map_size(at) <= _WALK_MAX_PAIRS:
            return self.map(depth)
        return self.fed_as_needed(self.unpacker.unpack)

    def step_over(self, at: int, size: int) -> None:
        """Move past the `size` bytes at `at` (the next value's), feeding none that are not
        fed yet: the part already in the unpacker's buffer is read out of it."""
        buffered = min(self.fed - at, size)
        self.unpacker.read_bytes(buffered)
        self.stepped_over += size - buffered
        self.fed = max(self.fed, at + size)

    def fed_as_needed(self, read: Callable[[], T]) -> T:
        """`read()`, feeding the unpacker more of the document (twice as much each time) for
        as long as it runs out of data; msgpack resumes a value it had begun."""
        piece = _FEED_BYTES
        while True:
            try:
                return read()
            except msgpack.OutOfData:
                if self.fed >= len(self.encoded):
                    raise
                self.unpacker.feed(self.encoded[self.fed : self.fed + piece])
                self.fed = min(len(self.encoded), self.fed + piece)
                piece *= 2

    def map_size(self, at: int) -> int:
        """The number of pairs of the map whose header is at `at`; 0 for any other value."""
        kind = self.encoded[at]
        if 0x80 <= kind <= 0x8F:
            return kind & 0x0F
        size = {0xDE: 2, 0xDF: 4}.get(kind, 0)
        return int.from_bytes(self.encoded[at + 1 : at + 1 + size], "big") if size else 0

    def map(self, depth: int) -> Any:
        pairs = {}
        for _ in range(self.fed_as_needed(self.unpacker.read_map_header)):
            key = self.fed_as_needed(self.unpacker.unpack)
            pairs[key] = self.value(depth + 1)
        result = _unpack_hook(pairs)
        if result is pairs:
            for key, value in pairs.items():
                if isinstance(value, memoryview):
                    pairs[key] = value.tobytes()
        return result


def _check_dtype(dtype: np.dtype[Any]) -> None:
    if dtype.kind not in _ALLOWED_KINDS:
        raise CodecError(f"Unsupported dtype: {dtype} (only bool, integer and float arrays)")


def _pack_default(obj: Any) -> Any:
    if isinstance(obj, PreEncoded):
        if obj.wire != "msgpack":
            raise TypeError("a value pre-encoded as JSON cannot go into msgpack")
        return msgspec.Raw(obj.data)
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


_ENCODER = msgspec.msgpack.Encoder(enc_hook=_pack_default)


def _get(obj: dict[Any, Any], key: str) -> Any:
    value = obj.get(key)
    return obj.get(key.encode()) if value is None else value


def _unpack_hook(obj: dict[Any, Any]) -> Any:
    if not (  # most maps: four lookups, and no call
        "__ndarray__" in obj or b"__ndarray__" in obj
        or "__npgeneric__" in obj or b"__npgeneric__" in obj
    ):  # fmt: skip
        return obj
    # The markers are `True` where an array or scalar was written (by us or openpi): a map that
    # merely has such a key (a camera named "__ndarray__", its pixels a list) is a map.
    if _get(obj, "__ndarray__") is True:
        return _unpack_array(obj)
    if _get(obj, "__npgeneric__") is True:
        dtype = _dtype(_get(obj, "dtype"))
        try:
            return dtype.type(_get(obj, "data"))
        except (TypeError, ValueError, OverflowError) as exc:
            raise CodecError(f"malformed msgpack body: bad numpy scalar: {exc}") from None
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
    if not isinstance(data, bytes | bytearray | memoryview):
        raise CodecError("ndarray data must be binary")
    expected = math.prod(shape) * dtype.itemsize
    if len(data) != expected:
        raise CodecError(
            f"ndarray data has {len(data)} bytes, shape {list(shape)} of {dtype} needs {expected}"
        )
    # Read-only, as its buffer is: msgpack gives bin values as bytes, and `_Walk` slices of a
    # read-only view of the body.
    array: np.ndarray = np.ndarray(buffer=data, dtype=dtype, shape=tuple(shape))
    return array

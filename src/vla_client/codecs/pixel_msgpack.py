"""Nested uint8 pixel lists in msgpack, written and read with numpy instead of msgpack's ints.

An old client's ``msgpack.packb(frame.tolist())`` is an array of H rows, each an array of W
pixels, each an array of C ints: every int below 128 one byte (a positive fixint), every other
one two (``0xcc`` and the byte). Building or reading that through msgpack costs one Python int
per value, about 400 ms for three 360x640 cameras each way.

`nested_list_msgpack` writes exactly the bytes ``msgpack.packb(frame.tolist())`` writes, with
numpy: a template holding every possible byte of each pixel, of which the ``0xcc`` markers of
values below 128 are dropped in one pass.

`read_nested_list` reads such a list back, or returns None for anything else (so msgpack reads
it as before). The one thing numpy cannot see at once is where each item starts, since a
``0xcc`` marker may be followed by a value that is itself 0xcc: every byte starts an item except
the one after a marker, and within a run of consecutive 0xcc bytes markers and values
alternate, so the starts follow from the parity of each byte's place in its run. With the starts
known, the list is regular only if the sequence of items matches the one H, W and C dictate
(row headers, pixel headers, values), which is checked item by item; the values are then a
strided view of the items. Non-minimal ``0xcc`` values below 128, which msgpack reads as ints
too, are read as well.
"""

from __future__ import annotations

import numpy as np

_UINT8 = 0xCC
_FIXINT_END = 0x80


def array_header(length: int) -> bytes:
    """msgpack's header of an array of `length` items (fixarray, array 16 or array 32)."""
    if length < 16:
        return bytes([0x90 | length])
    if length < 1 << 16:
        return b"\xdc" + length.to_bytes(2, "big")
    return b"\xdd" + length.to_bytes(4, "big")


def nested_list_msgpack(frame: np.ndarray) -> bytes:
    """``msgpack.packb(frame.tolist())`` for an HxWxC uint8 frame, written by numpy."""
    height, width, channels = frame.shape
    pixel_header, row_header = array_header(channels), array_header(width)
    head = len(pixel_header)
    pixel = head + 2 * channels
    row = len(row_header) + width * pixel
    template = np.empty((height, row), np.uint8)
    keep = np.ones((height, row), np.bool_)
    template[:, : len(row_header)] = np.frombuffer(row_header, np.uint8)
    pixels = template[:, len(row_header) :].reshape(height, width, pixel)
    kept = keep[:, len(row_header) :].reshape(height, width, pixel)
    pixels[:, :, :head] = np.frombuffer(pixel_header, np.uint8)
    pixels[:, :, head::2] = _UINT8
    pixels[:, :, head + 1 :: 2] = frame
    np.greater_equal(frame, _FIXINT_END, out=kept[:, :, head::2])
    kept_bytes = template.reshape(-1).take(np.flatnonzero(keep))  # faster than template[keep]
    return array_header(height) + kept_bytes.tobytes()


def read_nested_list(data: memoryview | bytes, at: int = 0) -> tuple[np.ndarray, int] | None:
    """The HxWxC uint8 array of the nested int list at `at` and where the list ends, or None
    when the value there is not a regular one (which msgpack then reads as it is)."""
    encoded = np.frombuffer(data, np.uint8)
    outer = _read_header(encoded, at)
    if outer is None:
        return None
    height, rows_at = outer
    first_row = _read_header(encoded, rows_at)
    if first_row is None:
        return None
    width, pixels_at = first_row
    first_pixel = _read_header(encoded, pixels_at)
    if first_pixel is None or pixels_at + 1 != first_pixel[1]:
        return None  # only fixarray pixels (up to 15 channels)
    channels = first_pixel[0]
    row_header = encoded[rows_at:pixels_at]
    if min(height, width, channels) < 1 or (row_header[1:] == _UINT8).any():
        return None
    per_row = row_header.size + width * (1 + channels)
    body = encoded[rows_at : rows_at + height * (row_header.size + width * (1 + 2 * channels))]
    items = np.flatnonzero(_item_starts(body))[: height * per_row]
    if items.size != height * per_row:
        return None
    heads = body.take(items).reshape(height, per_row)  # each item's first byte
    if (heads[:, : row_header.size] != row_header).any():
        return None
    cells = heads[:, row_header.size :].reshape(height, width, 1 + channels)
    if (cells[:, :, 0] != encoded[pixels_at]).any():
        return None
    values = np.ascontiguousarray(cells[:, :, 1:])
    marked = values == _UINT8
    if ((values >= _FIXINT_END) & ~marked).any():
        return None  # an item that is not a uint8 (a negative int, a float, a nested list...)
    end = int(items[-1]) + 1 + int(marked[-1, -1, -1])
    if end > body.size:
        return None
    if marked.any():  # a 0xcc marker: the value is the byte after it
        after = body.take(items + 1, mode="clip").reshape(height, per_row)
        cells = after[:, row_header.size :].reshape(height, width, 1 + channels)
        np.copyto(values, cells[:, :, 1:], where=marked)
    return values, rows_at + end


def _read_header(encoded: np.ndarray, at: int) -> tuple[int, int] | None:
    """(length, where the items start) of the array header at `at`, or None."""
    if at >= encoded.size:
        return None
    kind = int(encoded[at])
    if 0x90 <= kind <= 0x9F:
        return kind & 0x0F, at + 1
    size = {0xDC: 2, 0xDD: 4}.get(kind)
    if size is None or at + 1 + size > encoded.size:
        return None
    return int.from_bytes(encoded[at + 1 : at + 1 + size].tobytes(), "big"), at + 1 + size


def _item_starts(body: np.ndarray) -> np.ndarray:
    """Mask of the bytes that start an item: all but the value after each 0xcc marker."""
    starts = np.ones(body.size, np.bool_)
    markers = np.flatnonzero(body == _UINT8)
    if markers.size == 0:
        return starts
    index = np.arange(markers.size)
    run_start = np.ones(markers.size, np.bool_)
    run_start[1:] = markers[1:] != markers[:-1] + 1
    place = index - np.maximum.accumulate(np.where(run_start, index, 0))
    is_marker = place % 2 == 0  # in a run of 0xcc bytes, markers and values alternate
    after = markers + 1
    inside = after < body.size
    starts[after[inside]] = ~is_marker[inside]
    return starts

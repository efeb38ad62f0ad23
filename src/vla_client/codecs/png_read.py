"""Read the PNGs that fast writers produce without libpng: ISA-L inflate, numpy unfiltering.

Decoding a camera PNG is mostly inflating its zlib stream: libpng (inside OpenCV and Pillow)
uses zlib, and ISA-L's inflate is about 2.5x faster. What is left is undoing each row's filter.
fpng, the client's default writer, filters every row with Up (add the row above), which numpy
undoes a row at a time; OpenCV with vla-client's settings uses Sub (add the pixel to the
left), which is a running sum along each row, one `np.cumsum` for the whole image.

`read_png` takes only what it can read this way: 8-bit RGB, not interlaced, rows filtered with
None, Sub or Up, every chunk's CRC right, known critical chunks only, the image stream exactly
the size the header gives and its Adler-32 right. For anything else it returns None, and the
caller decodes the file with OpenCV, exactly as it would without this module: so this path never
accepts a file that libpng refuses, nor refuses one that libpng reads. The caller has already
checked the header's size against its pixel limit and that the file ends with IEND.
"""

from __future__ import annotations

import struct

import numpy as np

try:
    from isal import isal_zlib
except ImportError:  # without ISA-L this path is no faster than OpenCV: leave PNGs to OpenCV
    isal_zlib = None  # type: ignore[assignment]

_HEADER = 8  # the PNG signature
_RGB8 = (8, 2, 0, 0, 0)  # bit depth, colour type, compression, filter method, interlace
_NONE, _SUB, _UP = 0, 1, 2


def read_png(data: bytes) -> np.ndarray | None:
    """The HxWx3 uint8 RGB pixels of `data`, or None when this fast path does not apply."""
    if isal_zlib is None:
        return None
    layout = _chunks(data)
    if layout is None:
        return None
    (width, height), stream = layout
    stride = 3 * width + 1
    raw = _inflate(stream, height * stride)
    if raw is None:
        return None
    rows = np.frombuffer(raw, np.uint8).reshape(height, stride)
    return _unfilter(rows[:, 0], rows[:, 1:], width)


def _chunks(data: bytes) -> tuple[tuple[int, int], bytes | memoryview] | None:
    """(width, height) and the joined IDAT data of an 8-bit RGB PNG whose chunks check out."""
    view = memoryview(data)
    position, size, idat, after_idat = _HEADER, None, [], False
    while position + 12 <= len(data):
        (length,) = struct.unpack_from(">I", data, position)
        end = position + 12 + length
        if end > len(data):
            return None
        kind = bytes(view[position + 4 : position + 8])
        (crc,) = struct.unpack_from(">I", data, end - 4)
        if isal_zlib.crc32(view[position + 4 : end - 4]) != crc:
            return None
        body = view[position + 8 : end - 4]
        if position == _HEADER:
            if kind != b"IHDR" or length != 13:
                return None
            width, height, *rest = struct.unpack(">IIBBBBB", body)
            if tuple(rest) != _RGB8:
                return None
            size = (width, height)
        elif kind == b"IDAT":
            if after_idat:  # image data split by another chunk: leave it to libpng
                return None
            idat.append(body)
        elif kind == b"IEND":
            if size is None or not idat:
                return None
            return size, idat[0] if len(idat) == 1 else b"".join(idat)
        elif kind == b"PLTE" and not idat:
            pass  # a suggested palette for an RGB image, which decoders ignore
        elif not kind[0] & 0x20:
            return None  # any other critical chunk: a second IHDR, a late PLTE, an unknown one
        after_idat = after_idat or (bool(idat) and kind != b"IDAT")
        position = end
    return None


def _inflate(stream: bytes | memoryview, expected: int) -> bytes | None:
    """The inflated stream when it is exactly `expected` bytes and ends there, else None."""
    decompressor = isal_zlib.decompressobj()
    try:
        raw = decompressor.decompress(stream, expected)
    except isal_zlib.error:  # type: ignore[misc]  # the stubs declare it as an instance
        return None
    if len(raw) != expected or not decompressor.eof or decompressor.unused_data:
        return None
    return raw


def _unfilter(filters: np.ndarray, rows: np.ndarray, width: int) -> np.ndarray | None:
    """Undo each row's filter, or None when a row uses Average or Paeth (or an invalid type)."""
    if filters.max(initial=0) > _UP:
        return None
    sub = filters == _SUB
    if sub.all():  # OpenCV's files: one running sum for the whole image
        return np.cumsum(rows.reshape(-1, width, 3), axis=1, dtype=np.uint8)
    pixels = rows.copy()
    if sub.any():
        selected = pixels[sub].reshape(-1, width, 3)
        pixels[sub] = np.cumsum(selected, axis=1, dtype=np.uint8).reshape(-1, 3 * width)
    views = list(pixels)  # made once: a view per row costs more than the add it serves
    for row in (np.flatnonzero(filters[1:] == _UP) + 1).tolist():  # row 0: Up adds zeros
        np.add(views[row - 1], views[row], out=views[row])
    image: np.ndarray = pixels.reshape(-1, width, 3)
    return image

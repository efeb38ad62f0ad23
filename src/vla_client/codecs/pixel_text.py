"""Write uint8 arrays as JSON lists of numbers with numpy alone, for the ``pixels`` and ``raw``
encodings on the JSON wire.

``json.dumps(frame.tolist())`` builds one Python int per value and one list per pixel: about
350 ms for three 360x640 cameras. Here every value is written as a fixed-width record, three
characters right-aligned with spaces and a comma (``"  7,"``, ``" 42,"``, ``"255,"``): JSON allows
whitespace before a number, so the text is valid JSON that any parser reads to the same ints, and
because every record has the same width numpy writes them all at once from a 256-entry table.
The price is size: about 4 bytes a value, against about 3.5 for the shortest form of camera
frames. The result is a complete JSON value (``[[[  1, 23,255],...]]``), ready to be spliced
into a document as an ``orjson.Fragment``.
"""

from __future__ import annotations

import numpy as np

_RECORD = 4  # three characters and a comma
_RECORDS = np.frombuffer(
    b"".join(f"{value:3d},".encode() for value in range(256)), dtype="<u4"
)  # the record of each value, as one little-endian 4-byte word
_OPEN, _CLOSE, _COMMA = ord("["), ord("]"), ord(",")


def flat_list_text(array: np.ndarray) -> bytes:
    """``json.dumps(array.ravel().tolist())`` in meaning, for a uint8 array: ``[  1, 23,...]``."""
    flat = np.ascontiguousarray(array, dtype=np.uint8).reshape(-1)
    if flat.size == 0:
        return b"[]"
    text = np.empty(1 + _RECORD * flat.size, np.uint8)
    text[0] = _OPEN
    text[1:] = _RECORDS.take(flat).view(np.uint8)
    text[-1] = _CLOSE
    return text.tobytes()


def nested_list_text(frame: np.ndarray) -> bytes:
    """``json.dumps(frame.tolist())`` in meaning, for an HxWxC uint8 frame (H, W, C >= 1)."""
    height, width, channels = frame.shape
    pixel = 1 + _RECORD * channels + 1  # "[", the records (the last comma becomes "]"), ","
    row = 1 + width * pixel + 1  # "[", the pixels (the last comma becomes "]"), ","
    text = np.empty(1 + height * row, np.uint8)
    text[0] = _OPEN
    rows = text[1:].reshape(height, row)
    rows[:, 0] = _OPEN
    pixels = np.ndarray(
        (height, width, pixel), np.uint8, buffer=text, offset=2, strides=(row, pixel, 1)
    )
    pixels[:, :, 0] = _OPEN
    records = _RECORDS.take(np.ascontiguousarray(frame, dtype=np.uint8)).view(np.uint8)
    pixels[:, :, 1 : pixel - 1] = records.reshape(height, width, _RECORD * channels)
    pixels[:, :, pixel - 2] = _CLOSE
    pixels[:, :, pixel - 1] = _COMMA
    pixels[:, -1, pixel - 1] = _CLOSE
    rows[:, -1] = _COMMA
    text[-1] = _CLOSE
    return text.tobytes()


def read_nested_list_text(text: bytes) -> np.ndarray | None:
    """The frame `nested_list_text` wrote as `text`, or None for any other text.

    H, W and C follow from where the first pixel and the first row close; the digits are then
    at fixed offsets, read column by column, and the text must be exactly what
    `nested_list_text` writes for the values read, so nothing but that form is taken.
    """
    if not text.startswith(b"[[["):
        return None
    channels, left = divmod(text.find(b"]") - 2, _RECORD)
    pixel = _RECORD * channels + 2
    if left or channels < 1:
        return None
    width, left = divmod(text.find(b"]]"), pixel)
    row = 1 + width * pixel + 1
    if left or width < 1:
        return None
    height, left = divmod(len(text) - 1, row)
    if left or height < 1:
        return None
    rows = np.frombuffer(text, np.uint8, height * row, 1).reshape(height, row)
    cells = rows[:, 1 : 1 + width * pixel].reshape(height, width, pixel)[:, :, 1 : pixel - 1]
    digits = cells.reshape(height, width, channels, _RECORD) & 0x0F  # a space's nibble is 0
    values = digits[..., 0] * np.uint16(100) + digits[..., 1] * np.uint16(10) + digits[..., 2]
    if values.max() > 255:
        return None
    frame = values.astype(np.uint8)
    return frame if nested_list_text(frame) == text else None

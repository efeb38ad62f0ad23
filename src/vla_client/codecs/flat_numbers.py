"""Read a JSON list of small ints (``[12,0,255,...]``) straight from its bytes, with numpy.

SGLang's tensor payload ``{"values": [...], "dtype": "uint8", "shape": [h, w, 3]}`` carries a
frame as one flat list: 2 million numbers for three 360x640 cameras, each a Python int once a
JSON parser has read it. `parse_flat_list` reads the digits where they lie instead. A list in
`pixel_text`'s fixed-width form (vla-client's own) is a run of 4-byte records, read as words: the
low nibbles of the three characters are the digits (a space's is 0), and writing the values back
through the record table must give the same words, which proves the list is exactly that form.
Any other list is read through its commas: each number is the one to three digits before one,
so three gathers and a sum give every value at once. Only lists it is sure about are taken,
plain ints 0..255 without signs, fractions, exponents or leading zeros, separated by commas and
optional whitespace; for anything else it returns None and the JSON parser reads the list.
"""

from __future__ import annotations

import numpy as np

from vla_client.codecs.pixel_text import RECORDS

_WHITESPACE = b" \t\n\r"
_COMMA = (ord(",") - ord("0")) % 256  # a comma as a uint8 "digit": 252
_DIGIT_LIMIT = 10


def parse_flat_list(text: bytes) -> tuple[np.ndarray, bool] | None:
    """The uint8 values of `text` (whitespace, one flat list, an optional trailing comma) and
    whether that comma is there, or None when the list is not a plain list of ints 0..255."""
    core = text.strip(_WHITESPACE)
    comma = core.endswith(b",")
    if comma:
        core = core[:-1].rstrip(_WHITESPACE)
    if len(core) < 3 or core[0] != ord("[") or core[-1] != ord("]"):
        return None
    values = _fixed_width(core[1:-1])
    if values is not None:
        return values, comma
    inner = core[1:-1].strip(_WHITESPACE)
    compact = inner
    if any(space in inner for space in (b" ", b"\t", b"\n", b"\r")):
        compact = inner.translate(None, _WHITESPACE)
        if _numbers(inner) != compact.count(b",") + 1:
            return None  # whitespace between two numbers' digits: not JSON, the parser must say so
    values = _values(np.frombuffer(compact, np.uint8) - np.uint8(ord("0")))
    return None if values is None else (values, comma)


def _fixed_width(inner: bytes) -> np.ndarray | None:
    """The values of `pixel_text`'s records (``"  7, 42,255"``), or None for any other text."""
    if (len(inner) + 1) % 4 or not inner.startswith((b" ", b"1", b"2")):
        return None
    words = np.frombuffer(inner + b",", "<u4")
    nibbles = words & 0x0F0F0F
    values = (nibbles & 0xF) * 100 + ((nibbles >> 8) & 0xF) * 10 + (nibbles >> 16)
    if values.max() > 255 or not np.array_equal(RECORDS.take(values), words):
        return None
    result: np.ndarray = values.astype(np.uint8)
    return result


def _numbers(text: bytes) -> int:
    """How many runs of digits `text` holds."""
    digit = (np.frombuffer(text, np.uint8) - np.uint8(ord("0"))) < _DIGIT_LIMIT
    return int(digit[0]) + int(np.count_nonzero(digit[1:] & ~digit[:-1]))


def _values(digits: np.ndarray) -> np.ndarray | None:
    """`digits` is the list's inside less whitespace, each byte minus ``ord("0")``."""
    if digits.size == 0:
        return None
    commas = np.flatnonzero(digits == _COMMA)
    if np.count_nonzero(digits < _DIGIT_LIMIT) + commas.size != digits.size:
        return None  # something other than digits and commas
    bounds = np.empty(commas.size + 2, np.int64)
    bounds[0], bounds[1:-1], bounds[-1] = -1, commas, digits.size
    lengths = np.diff(bounds) - 1
    if lengths.min() < 1 or lengths.max() > 3:
        return None  # an empty item, or a number of four digits or more
    # Two commas in front, so that the two bytes before any number's last digit exist; a byte
    # that is not one of its digits reads as 252 and counts as 0.
    padded = np.concatenate([np.full(2, _COMMA, np.uint8), digits])
    ones = padded.take(bounds[1:] + 1)
    tens = padded.take(bounds[1:]) * (lengths >= 2)
    hundreds = padded.take(bounds[1:] - 1) * (lengths == 3)
    values = ones + tens.astype(np.uint16) * 10 + hundreds.astype(np.uint16) * 100
    leading_zero = ((lengths == 2) & (tens == 0)) | ((lengths == 3) & (hundreds == 0))
    if leading_zero.any() or values.max() > 255:
        return None
    result: np.ndarray = values.astype(np.uint8)
    return result

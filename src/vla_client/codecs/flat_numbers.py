"""Read a JSON list of small ints (``[12,0,255,...]``) straight from its bytes, with numpy.

SGLang's tensor payload ``{"values": [...], "dtype": "uint8", "shape": [h, w, 3]}`` carries a
frame as one flat list: 2 million numbers for three 360x640 cameras, each a Python int once a
JSON parser has read it. `parse_flat_list` reads the digits where they lie instead. A list in
`pixel_text`'s fixed-width form (vla-client's own) is a run of 4-byte records, each read as two
16-bit words: a table gives the value of the first two characters (and refuses every pair
`pixel_text` never writes), the second word is the last digit and its comma, so every record
read is one `pixel_text` writes, which proves the list is that form.
Any other list is read through its commas: each number is the one to three digits before one,
so three gathers and a sum give every value at once. Only lists it is sure about are taken,
plain ints 0..255 without signs, fractions, exponents or leading zeros, separated by commas and
optional whitespace; for anything else it returns None and the JSON parser reads the list.
"""

from __future__ import annotations

import numpy as np

_WHITESPACE = b" \t\n\r"
_COMMA = (ord(",") - ord("0")) % 256  # a comma as a uint8 "digit": 252
_DIGIT_LIMIT = 10
_UNITS_ZERO = np.uint16(ord("0") | ord(",") << 8)  # "0," as a little-endian 16-bit word
_NOT_A_RECORD = 1024  # above any sum of a record's parts, so the check for > 255 refuses it


def parse_flat_list(body: bytes, start: int, end: int) -> tuple[np.ndarray, bool] | None:
    """The uint8 values of ``body[start:end]`` (whitespace, one flat list, an optional trailing
    comma) and whether that comma is there, or None when the list is not a plain list of ints
    0..255. The list is read where it lies in `body`; only the general path copies it."""
    first, last = _inside(body, start, end)
    comma = last > first and body[last - 1] == ord(",")
    if comma:
        last = _inside(body, first, last - 1)[1]
    if last - first < 3 or body[first] != ord("[") or body[last - 1] != ord("]"):
        return None
    values = _fixed_width(body, first + 1, last - 1)
    if values is not None:
        return values, comma
    inner = body[first + 1 : last - 1].strip(_WHITESPACE)
    compact, numbers = inner, None
    if any(space in inner for space in (b" ", b"\t", b"\n", b"\r")):
        # Whitespace between two numbers' digits is not JSON: the count of digit runs before
        # the whitespace goes must stay what the commas say, or the parser must say so.
        compact, numbers = inner.translate(None, _WHITESPACE), _numbers(inner)
    values = _values(np.frombuffer(compact, np.uint8) - np.uint8(ord("0")), numbers)
    return None if values is None else (values, comma)


def _inside(body: bytes, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` less the whitespace at both ends."""
    while start < end and body[start] in _WHITESPACE:
        start += 1
    while end > start and body[end - 1] in _WHITESPACE:
        end -= 1
    return start, end


def _fixed_width(body: bytes, start: int, end: int) -> np.ndarray | None:
    """The values of `pixel_text`'s records (``"  7, 42,255"``) in ``body[start:end]``, or None
    for any other text. The last record has no comma: it is read from a copy of its own."""
    count, left = divmod(end - start + 1, 4)
    if left or count < 1 or body[start] not in b" 12":
        return None
    values = np.empty(count, np.uint16)
    records = np.frombuffer(body, "<u2", 2 * (count - 1), start).reshape(-1, 2)
    last = np.frombuffer(body[end - 3 : end] + b",", "<u2").reshape(1, 2)
    if not (_record_values(records, values[:-1]) and _record_values(last, values[-1:])):
        return None
    if values.max() > 255:
        return None
    result: np.ndarray = values.astype(np.uint8)
    return result


def _record_values(records: np.ndarray, out: np.ndarray) -> bool:
    """Write the value of each record into `out`; False when one is not a record of `pixel_text`.

    A record is two little-endian 16-bit halves: the first two characters, looked up in
    `_HUNDREDS_AND_TENS` (a value >= 1024 for a pair `pixel_text` never writes), and the last
    digit with its comma, which is ``"0,"`` plus the digit. One gather and one subtraction read
    every record, where the digits taken apart one by one cost three times as long."""
    units = records[:, 1] - _UNITS_ZERO
    if units.size and units.max() >= _DIGIT_LIMIT:
        return False
    np.take(_HUNDREDS_AND_TENS, records[:, 0], out=out)
    out += units
    return True


def _hundreds_and_tens() -> np.ndarray:
    """The value of a record's first two characters, by their 16-bit word: ``"  "`` is 0,
    ``" 4"`` 40, ``"25"`` 250; every pair `pixel_text` never writes (a leading zero, a digit
    after a space's place, a hundreds digit above 2) maps to `_NOT_A_RECORD`."""
    table = np.full(1 << 16, _NOT_A_RECORD, np.uint16)
    space, zero = ord(" "), ord("0")
    table[space | space << 8] = 0
    for tens in range(1, 10):
        table[space | (zero + tens) << 8] = 10 * tens
    for hundreds in (1, 2):
        for tens in range(10):
            table[(zero + hundreds) | (zero + tens) << 8] = 100 * hundreds + 10 * tens
    return table


def _numbers(text: bytes) -> int:
    """How many runs of digits `text` holds."""
    digit = (np.frombuffer(text, np.uint8) - np.uint8(ord("0"))) < _DIGIT_LIMIT
    return int(digit[0]) + int(np.count_nonzero(digit[1:] & ~digit[:-1]))


def _values(digits: np.ndarray, numbers: int | None) -> np.ndarray | None:
    """`digits` is the list's inside less whitespace, each byte minus ``ord("0")``; `numbers`,
    when given, how many numbers the list had before its whitespace was taken out.

    Every check and the value of the number ending at each byte are worked out for all bytes
    at once; the values are then gathered at the last digit of each number.
    """
    size = digits.size
    digit = digits < _DIGIT_LIMIT
    comma = digits == _COMMA
    if size == 0 or np.count_nonzero(digit) + np.count_nonzero(comma) != size:
        return None  # something other than digits and commas
    if not (digit[0] and digit[-1]) or (comma[1:] & comma[:-1]).any():
        return None  # an empty item
    if (digit[3:] & digit[2:-1] & digit[1:-2] & digit[:-3]).any():
        return None  # a number of four digits or more
    starts = digit.copy()
    starts[1:] &= comma[:-1]
    if (starts[:-1] & (digits[:-1] == 0) & digit[1:]).any():
        return None  # a leading zero: not JSON, the parser must say so
    known = digits * digit  # a comma counts as 0
    number = known.astype(np.uint16)
    number[1:] += known[:-1] * np.uint16(10)
    number[2:] += (known[:-2] * digit[1:-1]) * np.uint16(100)
    last = np.flatnonzero(comma) - 1
    if numbers is not None and numbers != last.size + 1:
        return None
    values = np.concatenate([number.take(last), number[-1:]])
    if values.max() > 255:
        return None
    result: np.ndarray = values.astype(np.uint8)
    return result


_HUNDREDS_AND_TENS = _hundreds_and_tens()

"""Pull ``image.tolist()`` pixel lists (and base64 image strings) out of a raw JSON body before
it is parsed.

Old robot clients send each camera as a nested ``[H][W][C]`` list of ints: three 360x640 cameras
are about 2 million numbers and 9-11 MB of JSON. ``json.loads`` builds one Python int per number
and `pixel_list_to_array` then walks them all again. Here the body bytes are scanned with
vectorised numpy instead: each regular pixel list is turned into a uint8 array straight from its
digits and replaced in the body by a short placeholder string, so the JSON parser only sees a
small body. `restore_placeholders` puts the arrays back after parsing::

    body, arrays = extract_pixel_lists(raw)
    obj = restore_placeholders(orjson.loads(body), arrays)

The result equals ``json.loads(raw)`` with `pixel_list_to_array` applied to each extracted value.
Only lists this module is sure about are taken (plain ints 0..255 without signs, fractions,
exponents or leading zeros, every row and every pixel the same length). Everything else stays
in the body byte for byte, so the general path (`pixel_list_to_array`) decides it exactly as
SGLang does: floats, out-of-range ints, ragged lists and so on.

Only lists that are the value of an object member (``"wrist": [[[...]]]``) or the whole body are
taken. A pixel list inside another list is left alone, so a 4-level batch ``[B][H][W][C]`` under
``observation.images`` stays a list of lists, as in SGLang. The flip side: every member value
that is a regular pixel list comes back as an array, whichever field holds it. Flat lists are
taken only as the ``"values"`` or ``"data"`` of a tensor payload (`flat_numbers`), where
`tensor_payload_to_array` applies the payload's dtype and shape as it would to the list.

Lists in vla-client's own fixed-width form (`pixel_text`) are recognised and read at fixed
offsets; any other list goes through the general readers here and in `flat_numbers`.

With ``base64=True`` (the server's request decoding) the same search takes the long strings that
are the value of a ``"b64_json"`` or ``"base64"`` member: their text comes back as ASCII bytes,
cut from the body, so the JSON parser never builds megabytes of Python strings only for them to
be encoded back to bytes for the base64 decoder (0.6 ms for three PNG cameras). Only strings
without a backslash are taken (an escaped character is the parser's to undo); whatever else
is in them is the base64 decoder's to refuse, which it does for anything outside its alphabet,
control characters and non-ASCII bytes included.

Parse the small body with ``json.loads`` where SGLang's outcomes must hold exactly: orjson reads
ints beyond 64 bits as floats, so ``[[[2**70, 1, 2]]]`` (left in the body, as it must be) would
become a float64 array instead of staying a list.
"""

from __future__ import annotations

import re
import secrets
from typing import Any, Literal

import numpy as np

from vla_client.codecs.flat_numbers import parse_flat_list
from vla_client.codecs.parallel import map_frames
from vla_client.codecs.pixel_text import read_nested_list_text

PREFIX = "\x00vla-pixels:"
"""Start of every placeholder; clients cannot send a NUL-prefixed string by accident."""

# Translation table: 1 for every byte that cannot occur in a list of plain ints (quotes, colons,
# letters, "-", "."), 0 for digits, ",", "[", "]" and JSON whitespace. bytes.translate is a
# plain C table lookup, faster than numpy fancy indexing for this.
_OTHER = bytes(0 if b in b"0123456789,[] \t\n\r" else 1 for b in range(256))

_WHITESPACE = b" \t\n\r"
_NESTED = re.compile(rb"[ \t\n\r]*\[[ \t\n\r]*\[")  # a list's start, when its first item is a list
_LIST_BYTES = b"0123456789,[]" + _WHITESPACE
_SEARCH_MAX_COLONS = 4096
_FEW = 64

# Maps every digit to "0" so that a list's token string can be compared with its expected shape.
_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_SMALLEST = len(b"[[[0]]]")
_TENSOR = (b'"values"', b'"data"')
_BASE64 = (b'"b64_json"', b'"base64"')

SpanKind = Literal["list", "tensor", "base64"]
Span = tuple[int, int, SpanKind]


def extract_pixel_lists(
    body: bytes, *, min_bytes: int = 4096, base64: bool = False
) -> tuple[bytes, dict[str, np.ndarray | bytes]]:
    """Replace each regular pixel list in `body` (and with `base64`, each base64 image string)
    with a placeholder string.

    Taken are ``[H][W][C]`` uint8 lists that are the value of any object member, and flat uint8
    lists that are the value of a ``"values"`` or ``"data"`` member (a tensor payload). Returns
    the new body and ``{placeholder: value}``; the arrays are C-contiguous, writable uint8 of
    shape (H, W, C), or (N,) for flat lists; a base64 string's value is its text as bytes.
    Values shorter than `min_bytes` bytes are left for the general path, where they cost
    little. The placeholders carry a random tag per call, so a string a client sends can never
    be mistaken for one.
    """
    lo = max(min_bytes, _SMALLEST)
    spans = _spans_by_search(body, lo, base64)
    if spans is None:
        spans = _spans_by_scan(body, lo)
    if not spans:
        return body, {}

    def parse(span: Span) -> tuple[np.ndarray | bytes, bool] | None:
        return _parse_span(body, *span)

    # numpy reads each list with the GIL released: several cameras' lists in parallel threads
    # (a base64 string is only cut out, not worth a thread's hop)
    lists = sum(kind != "base64" for _, _, kind in spans)
    found = map_frames(parse, spans) if lists > 1 else [parse(span) for span in spans]

    tag = secrets.token_hex(8)
    arrays: dict[str, np.ndarray | bytes] = {}
    pieces: list[bytes] = []
    done = 0
    for (start, end, _), parsed in zip(spans, found, strict=True):
        if parsed is None:
            continue
        array, comma = parsed
        key = f"{PREFIX}{tag}:{len(arrays)}"
        arrays[key] = array
        pieces += [body[done:start], b'"\\u0000', key[1:].encode(), b'"', b"," if comma else b""]
        done = end
    if not arrays:
        return body, {}
    pieces.append(body[done:])
    return b"".join(pieces), arrays


def restore_placeholders(obj: Any, arrays: dict[str, np.ndarray | bytes]) -> Any:
    """Put the arrays from `extract_pixel_lists` back where their placeholders are in `obj`.

    Dicts and lists are updated in place; the (possibly new) top-level object is returned. The
    walk uses its own stack, so a deeply nested body cannot hit Python's recursion limit.
    """
    if not arrays:
        return obj
    if isinstance(obj, str):
        return arrays.get(obj, obj)
    stack = [obj]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in list(items):
            if isinstance(value, str):
                if value.startswith(PREFIX) and value in arrays:
                    node[key] = arrays[value]
            elif isinstance(value, dict | list):
                stack.append(value)
    return obj


def _parse_span(
    body: bytes, start: int, end: int, kind: SpanKind
) -> tuple[np.ndarray | bytes, bool] | None:
    """The value in ``body[start:end]``: a list nested anywhere, flat only as a tensor's values;
    a base64 string's text (the span holds its quotes)."""
    if kind == "base64":
        return body[start + 1 : end - 1], False
    if _NESTED.match(body, start):
        text = body[start:end].strip(_WHITESPACE)
        comma = text.endswith(b",")
        frame = read_nested_list_text(text[:-1].rstrip(_WHITESPACE) if comma else text)
        if frame is not None:  # vla-client's own fixed-width form
            return frame, comma
        return _parse(np.frombuffer(body, np.uint8, end - start, start))
    return parse_flat_list(body, start, end) if kind == "tensor" else None


def _spans_by_search(body: bytes, lo: int, base64: bool) -> list[Span] | None:
    """The candidate spans, found by jumping from colon to colon; None when this cannot tell.

    A span starts after a colon outside every string and runs to the next quote or closing
    brace, which a list of numbers cannot hold, so the search jumps over each list at memchr
    speed. Which colons lie outside strings follows from counting the unescaped quotes before
    them. With `base64`, a member value that is a base64 key's string of `lo` bytes or more
    without a backslash is a span too, quotes included. A body with very many colons is not
    what this is for: None hands it to `_spans_by_scan` (which takes no strings).
    """
    spans: list[Span] = []
    position = quotes = 0
    for _ in range(_SEARCH_MAX_COLONS):
        colon = body.find(b":", position)
        if colon < 0:
            if not spans and position == 0 and len(body) >= lo and b'"' not in body:
                return [(0, len(body), "list")]  # the whole body may be one list
            return spans
        quotes += _unescaped_quotes(body, position, colon)
        position = colon + 1
        if quotes % 2:
            continue  # a colon inside a string
        text = _base64_text(body, colon, lo) if base64 else None
        if text is not None:
            spans.append((*text, "base64"))
            position = text[1]  # past both quotes: the count of quotes stays even
            continue
        quote = body.find(b'"', position)
        end = len(body) if quote < 0 else quote
        brace = body.find(b"}", position, end)
        end = end if brace < 0 else brace
        if end - position >= lo:
            spans.append((position, end, _list_kind(body, colon)))
        position = end
    return None


def _base64_text(body: bytes, colon: int, lo: int) -> tuple[int, int] | None:
    """The span, quotes included, of the string after `colon` when its member is a base64 key
    and the string is `lo` bytes or more with no backslash; else None."""
    start = colon + 1
    while start < len(body) and body[start] in _WHITESPACE:
        start += 1
    if body[start : start + 1] != b'"' or not _is_key(body, colon, _BASE64):
        return None
    close = body.find(b'"', start + 1)
    if close - start - 1 < lo or body.find(b"\\", start + 1, close) >= 0:
        return None
    return start, close + 1


def _unescaped_quotes(body: bytes, start: int, end: int) -> int:
    """How many quotes in ``body[start:end]`` are not escaped by a backslash."""
    if body.find(b"\\", start, end) < 0:
        return _count(body, b'"', start, end)
    region = np.frombuffer(body, np.uint8, end - start, start)
    positions = np.flatnonzero((region == 0x22) | (region == 0x5C))
    chars = region[positions]
    slash = chars == 0x5C
    return int(np.count_nonzero((chars == 0x22) & ~_escaped(positions, slash)))


def _count(body: bytes, char: bytes, start: int, end: int) -> int:
    """``body.count(char, start, end)``; by jumping from one to the next while they are few,
    as between the keys of a document (memchr runs over a long string far faster than count)."""
    found, at = 0, body.find(char, start, end)
    while at >= 0:
        found += 1
        if found == _FEW:
            return found + body.count(char, at + 1, end)
        at = body.find(char, at + 1, end)
    return found


def _spans_by_scan(body: bytes, lo: int) -> list[Span]:
    """The candidate spans, from the positions of every byte that cannot be in a list."""
    data = np.frombuffer(body, np.uint8)
    other = np.flatnonzero(np.frombuffer(bytes(body).translate(_OTHER), np.bool_))
    return [
        (start, end, _list_kind(body, start - 1)) for start, end in _member_values(data, other, lo)
    ]


def _list_kind(body: bytes, colon: int) -> SpanKind:
    """A tensor's values when the member whose colon is at `colon` is ``"values"`` or
    ``"data"``, a list anywhere else."""
    return "tensor" if _is_key(body, colon, _TENSOR) else "list"


def _is_key(body: bytes, colon: int, names: tuple[bytes, ...]) -> bool:
    """Whether the member whose colon is at `colon` is named one of `names` (quoted): the
    name, then the "{" or "," before it, with any JSON whitespace around the name."""
    end = _text_end(body, colon)
    for name in names:
        if body.startswith(name, end - len(name), end):
            before = _text_end(body, end - len(name))
            return body[before - 1 : before] in (b"{", b",")
    return False


def _text_end(body: bytes, at: int) -> int:
    """The index just past the last byte before `at` that is not JSON whitespace, 0 if none.

    Read backwards 64 bytes at a time, so however much indentation lies before a key (deep
    or wide ``json.dumps(indent=...)``), it is found, at the cost of the whitespace only."""
    while at > 0:
        start = max(0, at - 64)
        kept = len(body[start:at].rstrip(_WHITESPACE))
        if kept:
            return start + kept
        at = start
    return 0


def _member_values(data: np.ndarray, other: np.ndarray, lo: int) -> list[tuple[int, int]]:
    """Byte spans that follow an object member's colon and hold only list-of-number bytes.

    `other` holds the positions of every byte that cannot be part of a pixel list, quotes and
    colons among them, so the string state of the body can be worked out on these few positions
    alone: a span counts only when the colon before it lies outside every JSON string.
    """
    chars = data[other]
    quote = chars == 0x22
    slash = chars == 0x5C
    if slash.any():
        quote &= ~_escaped(other, slash)
    outside = (np.cumsum(quote) & 1) == 0
    ends = np.append(other[1:], data.size)
    keep = (chars == 0x3A) & outside & (ends - other - 1 >= lo)
    return [(int(s) + 1, int(e)) for s, e in zip(other[keep], ends[keep], strict=True)]


def _escaped(other: np.ndarray, slash: np.ndarray) -> np.ndarray:
    """Mask over `other`: the byte right after an odd-length run of backslashes."""
    index = np.arange(other.size)
    adjacent = np.zeros(other.size, bool)
    adjacent[1:] = other[1:] == other[:-1] + 1
    carried = np.zeros(other.size, bool)
    carried[1:] = slash[1:] & slash[:-1] & adjacent[1:]
    start = np.maximum.accumulate(np.where(slash & ~carried, index, 0))
    odd = slash & ((index - start) % 2 == 0)
    out = np.zeros(other.size, bool)
    out[1:] = odd[:-1] & adjacent[1:]
    return out


def _parse(seg: np.ndarray) -> tuple[np.ndarray, bool] | None:
    """Decode `seg` (whitespace, one list, optional trailing comma) or None when irregular.

    A token is a punctuation byte or the first digit of a number. With digits written as "0",
    the token string of a regular list is fully determined by H, W and C, so the structure is
    checked by reading H, W, C off the first pixel and row and comparing the whole string.
    Once it matches, the number tokens sit at fixed offsets, so their byte positions are a
    strided view of the token positions, already in (H, W, C) order.
    """
    if seg.tobytes().translate(None, _LIST_BYTES):
        return None  # something other than digits, punctuation and whitespace
    digit = (seg - 0x30) < 10
    token = seg > 0x20
    np.greater(token[1:], digit[1:] & digit[:-1], out=token[1:])
    where = np.flatnonzero(token)
    text = seg[where].tobytes().translate(_ZERO_DIGITS)
    comma = text.endswith(b",")
    if comma:
        text = text[:-1]
    shape = _shape(text)
    if shape is None:
        return None
    height, width, channels = shape
    row = width * (2 * channels + 2) + 1
    rows = where[1 : 1 + height * (row + 1)].reshape(height, row + 1)
    pixels = rows[:, 1:row].reshape(height, width, 2 * channels + 2)
    starts = np.ascontiguousarray(pixels[:, :, 1 : 2 * channels : 2])

    # Each number is 1-3 digits followed by a non-digit. The list ends in "]]]", so the four
    # bytes from any number's first digit lie inside `seg`; seg[k:][starts] is seg[starts + k].
    first, second, third, fourth = (seg[k:][starts] - 0x30 for k in range(4))
    two = second < 10
    three = two & (third < 10)
    if (three & (fourth < 10)).any() or ((first == 0) & two).any():
        return None  # four or more digits, or a leading zero (invalid JSON: let the parser say so)
    values = first.astype(np.uint16)
    values = np.where(two, values * 10 + second, values)
    values = np.where(three, values * 10 + third, values)
    if values.max() > 255:
        return None
    return values.astype(np.uint8), comma


def _shape(text: bytes) -> tuple[int, int, int] | None:
    """(H, W, C) when `text` is the token string of a regular ``[H][W][C]`` list, else None."""
    if not text.startswith(b"[[[0"):
        return None
    pixel_end = text.find(b"]")
    row_end = text.find(b"]]")
    if pixel_end % 2 or row_end < pixel_end:
        return None
    channels = pixel_end // 2 - 1
    width, left = divmod(row_end, 2 * channels + 2)
    height, left2 = divmod(len(text) - 1, row_end + 2)
    if left or left2 or width < 1 or height < 1:
        return None
    pixel = b"[" + b"0," * (channels - 1) + b"0]"
    row = b"[" + b",".join([pixel] * width) + b"]"
    if text != b"[" + b",".join([row] * height) + b"]":
        return None
    return height, width, channels

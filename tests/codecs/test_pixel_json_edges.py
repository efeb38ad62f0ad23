"""`extract_pixel_lists` at its edges: the size it starts taking at, whitespace however deep,
strings that hold colons, quotes and escapes, base64 strings cut or left, bodies cut short, and
bodies with so many colons that the byte scan reads them instead of the colon search.

The oracle is test_pixel_json's: ``json.loads`` with every regular member value turned into its
array by `pixel_list_to_array`; a body holding nothing the module may take stays byte for byte.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_pixel_json import DUMPS, documents, expected, same

from vla_client.codecs.pixel_json import PREFIX, extract_pixel_lists, restore_placeholders
from vla_client.codecs.pixel_text import flat_list_text, nested_list_text

IMAGE = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3) * 4
FLAT = np.arange(200, dtype=np.uint8)
TEXT = "iVBORw0KGgoAAAANSUhEUgAA" * 8  # base64 text without a "/" or a "+"
LIST = json.dumps((np.arange(13 * 13 * 3) % 256).reshape(13, 13, 3).tolist(), separators=(",", ":"))
PAD = ":" * 4096  # a string of colons: the colon search gives up and the byte scan reads the body


def parse(body: bytes, *, min_bytes: int = 0, base64: bool = False) -> tuple[Any, int]:
    """The document as the module's path reads it, and how many values it took."""
    new, arrays = extract_pixel_lists(body, min_bytes=min_bytes, base64=base64)
    return restore_placeholders(json.loads(new), arrays), len(arrays)


def untouched(body: bytes, **options: Any) -> bool:
    return extract_pixel_lists(body, **options) == (body, {})


def padded(obj: dict[str, Any], dumps: Any = orjson.dumps) -> bytes:
    """`obj` with a first member that sends the body to the byte scan."""
    return dumps({"pad": PAD, **obj})  # type: ignore[no-any-return]


# -- where taking starts: a value of `min_bytes` bytes is taken, one byte less is not


def member(span: int, *, spaced: bool, colons: bool = False) -> bytes:
    """``{"wrist": LIST}`` where the value's bytes (from the colon to the brace) are `span`."""
    pad = f'"pad": "{PAD}", ' if colons else ""
    head = f'{{{pad}"wrist":' + (" " if spaced else "")
    value = LIST + " " * (span - len(LIST) - spaced)
    return (head + value + "}").encode()


@pytest.mark.parametrize("colons", [False, True], ids=["search", "scan"])
@pytest.mark.parametrize("spaced", [False, True], ids=["compact", "spaced"])
@pytest.mark.parametrize("min_bytes", [None, 3000])
def test_a_value_of_min_bytes_is_taken_and_one_byte_less_is_not(
    min_bytes: int | None, spaced: bool, colons: bool
) -> None:
    size = 4096 if min_bytes is None else min_bytes
    options = {} if min_bytes is None else {"min_bytes": min_bytes}
    body = member(size, spaced=spaced, colons=colons)
    new, arrays = extract_pixel_lists(body, **options)
    assert len(arrays) == 1
    got = restore_placeholders(json.loads(new), arrays)
    assert same(got, expected(json.loads(body)))
    assert untouched(member(size - 1, spaced=spaced, colons=colons), **options)


@pytest.mark.parametrize("min_bytes", [None, 3000])
def test_a_whole_body_list_of_min_bytes_is_taken_and_one_byte_less_is_not(
    min_bytes: int | None,
) -> None:
    size = 4096 if min_bytes is None else min_bytes
    options = {} if min_bytes is None else {"min_bytes": min_bytes}
    body = (LIST + " " * (size - len(LIST))).encode()
    new, arrays = extract_pixel_lists(body, **options)
    assert same(restore_placeholders(json.loads(new), arrays), expected(json.loads(body)))
    assert len(arrays) == 1
    assert untouched(body[:-1], **options)
    assert untouched(b"[[[1,2,3]]]")


def test_a_small_list_late_in_a_long_body_is_left() -> None:
    body = json.dumps({"task": "x" * 5000, "wrist": [[[1, 2, 3]]], "left": [4, 5]}).encode()
    assert untouched(body)
    assert untouched(body, min_bytes=100)


# -- whitespace: however much JSON whitespace, and where, the same values are taken


def request() -> dict[str, Any]:
    images = {
        "wrist": IMAGE.tolist(),
        "left": {"values": FLAT.tolist(), "dtype": "uint8", "shape": [200]},
        "right": {"b64_json": TEXT},
        "top": {"base64": TEXT},
    }
    return {"input": {"task": "t", "observation": {"images": images, "state": [0.5]}}}


SPACINGS = {
    "indent 1": {"indent": 1},
    "indent 8": {"indent": 8},  # a key 48 spaces after its "{" or ","
    "indent 16": {"indent": 16},  # a list's first row 96 spaces after its "["
    "tabs": {"indent": "\t" * 20, "separators": (",\r\n", "\t:\n ")},
    "wide colons": {"separators": (" ,  ", " " * 40 + ":" + " " * 70)},
    "wide commas": {"separators": ("\n" * 50 + "," + " " * 50, ":")},
}


@pytest.mark.parametrize("spacing", SPACINGS.values(), ids=SPACINGS.keys())
@pytest.mark.parametrize("colons", [False, True], ids=["search", "scan"])
def test_whitespace_however_deep_takes_the_same_values(
    spacing: dict[str, Any], colons: bool
) -> None:
    dumps = lambda obj: json.dumps(obj, **spacing).encode()  # noqa: E731
    body = padded(request(), dumps) if colons else dumps(request())
    for base64 in (False, True):
        got, count = parse(body, base64=base64)
        strings = base64 and not colons  # the scan takes no strings
        assert count == 2 + 2 * strings
        images = got["input"]["observation"]["images"]
        assert same(images["wrist"], IMAGE)
        assert same(images["left"]["values"], FLAT)
        text = TEXT.encode() if strings else TEXT
        assert images["right"] == {"b64_json": text} and images["top"] == {"base64": text}
        assert got["input"]["task"] == "t" and got["input"]["observation"]["state"] == [0.5]


@pytest.mark.parametrize(
    "body",
    [
        b'{"wrist": ' + nested_list_text(IMAGE) + b"\x0c}",
        b'{"wrist": ' + nested_list_text(IMAGE) + b'\x0b, "task": "t"}',
        b'{"wrist": \x0c' + nested_list_text(IMAGE) + b"}",
        b'{"values"\x0c: ' + flat_list_text(FLAT) + b"}",
        b'{"a": 1,\x0b"values": ' + flat_list_text(FLAT) + b"}",
        b'{"cam": {"b64_json"\x0c: "' + TEXT.encode() + b'"}}',
    ],
    ids=["after", "before a comma", "before", "before a colon", "after a comma", "base64 key"],
)
def test_bytes_python_strips_but_json_refuses_leave_the_body_alone(body: bytes) -> None:
    """Vertical tab and form feed are whitespace to Python's `bytes.strip()`, not to JSON."""
    assert untouched(body, min_bytes=0, base64=True)
    for loads in (json.loads, orjson.loads):
        with pytest.raises(ValueError):
            loads(body)


def test_a_tensor_payload_as_the_whole_body_is_taken() -> None:
    for dumps in DUMPS.values():
        body = dumps({"values": FLAT.tolist(), "dtype": "uint8"})
        got, count = parse(body)
        assert count == 1 and same(got["values"], FLAT) and got["dtype"] == "uint8"


# -- strings: colons, quotes and escapes inside them never start or end a value


def test_several_colons_in_a_string_before_a_list() -> None:
    body = json.dumps({"task": "a:b:c:d", "wrist": IMAGE.tolist()}).encode()
    got, count = parse(body)
    assert count == 1 and same(got, expected(json.loads(body)))


@pytest.mark.parametrize("padding", [False, True], ids=["search", "scan"])
def test_a_body_that_is_one_string_is_left(padding: bool) -> None:
    text = "a: " + json.dumps(IMAGE.tolist()) + (PAD if padding else "")
    body = json.dumps(text).encode()
    assert untouched(body, min_bytes=0, base64=True)


@pytest.mark.parametrize("tail", ['x\\"y', 'x\\"\\"y'], ids=["odd", "even"])
def test_many_quotes_between_two_colons(tail: str) -> None:
    """64 and more quotes between two colons are counted in bulk; a string ends right after
    the 64th, and the strings after the list hold escaped quotes."""
    strings = ", ".join(['"a:"'] + ['""'] * 40)
    body = f'{{"k": [{strings}], "wrist": {json.dumps(IMAGE.tolist())}, "task": "{tail}"}}'
    got, count = parse(body.encode())
    assert count == 1 and same(got, expected(json.loads(body)))


@pytest.mark.parametrize(
    "key",
    ["x:\\", "x:\\\\", 'x:\\"', ': "\\\\', '"', "\\", "\\\\\\", 'a"b:c\\'],
)
@pytest.mark.parametrize("colons", [False, True], ids=["search", "scan"])
def test_keys_with_colons_and_backslashes_before_a_list(key: str, colons: bool) -> None:
    obj = {key: "v", "wrist": IMAGE.tolist(), "t": {"values": FLAT.tolist()}}
    body = padded(obj, lambda o: json.dumps(o).encode()) if colons else json.dumps(obj).encode()
    got, count = parse(body)
    assert count == 2
    assert same(got["wrist"], IMAGE) and same(got["t"]["values"], FLAT) and got[key] == "v"


@pytest.mark.parametrize("colons", [False, True], ids=["search", "scan"])
def test_a_list_written_inside_a_string_stays_a_string(colons: bool) -> None:
    inner = "say: " + LIST + ' and \\"more\\": ' + LIST
    obj = {"task": inner, "note": f"a:{LIST}", "wrist": IMAGE.tolist()}
    body = padded(obj) if colons else orjson.dumps(obj)
    got, count = parse(body, min_bytes=1000)
    assert count == 0  # the image is below 1000 bytes, the lists in strings are not values
    assert got == json.loads(body)
    got, count = parse(body)
    assert count == 1 and got["task"] == inner and same(got["wrist"], IMAGE)


# -- base64 strings


def b64_body(text: str, *, before: str = "", after: str = "") -> bytes:
    return f'{{{before}"cam": {{"b64_json": "{text}"}}{after}}}'.encode()


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ('"task": "a: b", ', ""),
        ('"task": "say \\"hi\\"", ', ""),
        ("", ', "task": "back\\\\slash"'),
        ('"k": "\\\\", ', ', "l": "\\u0041"'),
    ],
    ids=["colon before", "escapes before", "escape after", "both"],
)
def test_a_base64_string_is_cut_whatever_the_strings_around_it(before: str, after: str) -> None:
    body = b64_body(TEXT, before=before, after=after)
    got, count = parse(body, min_bytes=len(TEXT), base64=True)
    assert count == 1 and got["cam"] == {"b64_json": TEXT.encode()}
    assert {k: v for k, v in got.items() if k != "cam"} == {
        k: v for k, v in json.loads(body).items() if k != "cam"
    }


def test_a_base64_string_of_min_bytes_is_cut_and_one_byte_less_is_not() -> None:
    body = b64_body(TEXT)
    assert parse(body, min_bytes=len(TEXT), base64=True)[1] == 1
    assert untouched(body, min_bytes=len(TEXT) + 1, base64=True)
    late = b64_body(TEXT[:40], before=f'"task": "{"x" * 300}", ')
    assert untouched(late, min_bytes=100, base64=True)


@pytest.mark.parametrize(
    "body",
    [
        b64_body("\\/" + TEXT),  # an escape first ("/" may be written "\/")
        b64_body(TEXT + "\\/"),  # an escape last
        b'{"b64_json": "",' + b" " * 300 + b'"x": 1}',  # an empty string, long whitespace after
        b'{"b64_json": "", "s": [' + b"1," * 300 + b'1], "x": "y"}',
    ],
    ids=["escape first", "escape last", "empty, then whitespace", "empty, then numbers"],
)
def test_base64_strings_the_module_is_not_sure_of_are_left(body: bytes) -> None:
    assert untouched(body, min_bytes=100, base64=True)


# -- bodies cut short, and bodies that are not JSON


def cut_points(body: bytes) -> list[int]:
    return sorted({1, 2, len(body) // 3, len(body) // 2, len(body) - 2, len(body) - 1})


@pytest.mark.parametrize("colons", [False, True], ids=["search", "scan"])
def test_a_body_cut_short_stays_malformed(colons: bool) -> None:
    whole = padded(request()) if colons else orjson.dumps(request())
    bodies = [whole[:cut] for cut in cut_points(whole)]
    bodies += [
        b'{"cam": {"b64_json":',
        b'{"cam": {"b64_json":   ',
        b'{"cam": {"b64_json": "' + TEXT.encode(),
        b'{"wrist": ' + LIST.encode(),
        b'{"values": ' + flat_list_text(FLAT),
        f'{{"pad": "{PAD}", "wrist": {LIST}'.encode(),
        f'{{"pad": "{PAD}", "wrist": {LIST[:-5]}'.encode(),
        b" :" + LIST.encode(),
        b":" + LIST.encode(),
    ]
    for body in bodies:
        for base64 in (False, True):
            new, _ = extract_pixel_lists(body, min_bytes=0, base64=base64)
            for loads in (json.loads, orjson.loads):
                with pytest.raises(ValueError):
                    loads(body)
                with pytest.raises(ValueError):
                    loads(new)


# -- restoring


def test_restoring_into_a_document_that_is_a_string() -> None:
    body = json.dumps({"wrist": IMAGE.tolist()}).encode()
    _, arrays = extract_pixel_lists(body, min_bytes=0)
    assert restore_placeholders("a task", arrays) == "a task"
    spoof = f"{PREFIX}0000000000000000:0"
    assert restore_placeholders(spoof, arrays) == spoof
    (key,) = arrays
    assert same(restore_placeholders(key, arrays), IMAGE)


# -- the byte scan agrees with the general path on random documents


@given(doc=documents, dumps=st.sampled_from(list(DUMPS.values())))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_documents_read_by_the_byte_scan(doc: Any, dumps: Any) -> None:
    try:
        body = dumps({"pad": PAD, "doc": doc})
    except TypeError:
        return  # orjson cannot write ints beyond 64 bits
    got, _ = parse(body)
    assert same(got, expected(json.loads(body)))

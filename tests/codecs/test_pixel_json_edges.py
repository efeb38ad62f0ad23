"""`extract_pixel_lists` at its edges: whitespace however deep, in bodies read by the colon
search and in bodies with so many colons that the byte scan reads them instead.

The oracle is test_pixel_json's: ``json.loads`` with every regular member value turned into its
array by `pixel_list_to_array`; a body holding nothing the module may take stays byte for byte.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pytest
from test_pixel_json import same

from vla_client.codecs.pixel_json import extract_pixel_lists, restore_placeholders
from vla_client.codecs.pixel_text import flat_list_text, nested_list_text

IMAGE = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3) * 4
FLAT = np.arange(200, dtype=np.uint8)
TEXT = "iVBORw0KGgoAAAANSUhEUgAA" * 8  # base64 text without a "/" or a "+"
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

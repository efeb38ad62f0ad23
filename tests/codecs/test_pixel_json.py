"""`extract_pixel_lists` + orjson + `restore_placeholders` against ``json.loads`` + SGLang's rules.

The oracle is plain Python: a member value that is a regular, non-empty ``[H][W][C]`` list of
non-bool ints in 0..255 must come back as the uint8 array `pixel_list_to_array` makes of it;
every other value must come back exactly as ``json.loads`` gives it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vla_client.codecs.arrays import pixel_list_to_array
from vla_client.codecs.pixel_json import PREFIX, extract_pixel_lists, restore_placeholders

TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


LOADS: dict[str, Callable[[bytes], Any]] = {"orjson": orjson.loads, "json": json.loads}


def fast(body: bytes, min_bytes: int = 0, loads: Any = orjson.loads) -> Any:
    new, arrays = extract_pixel_lists(body, min_bytes=min_bytes)
    return restore_placeholders(loads(new), arrays)


def regular(value: Any) -> bool:
    """The lists the fast path must take: regular, non-empty, plain ints 0..255."""
    if not (isinstance(value, list) and value and all(isinstance(r, list) for r in value)):
        return False
    if not value[0] or not all(len(r) == len(value[0]) for r in value):
        return False
    pixels = [p for r in value for p in r]
    if not all(isinstance(p, list) and p and len(p) == len(pixels[0]) for p in pixels):
        return False
    return all(type(x) is int and 0 <= x <= 255 for p in pixels for x in p)


def expected(value: Any, *, member: bool = True) -> Any:
    """``json.loads`` output with every regular member value turned into its array."""
    if member and regular(value):
        array = pixel_list_to_array(value)
        assert isinstance(array, np.ndarray) and array.dtype == np.uint8
        return array
    if isinstance(value, dict):
        return {k: expected(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expected(v, member=False) for v in value]
    return value


def same(got: Any, want: Any) -> bool:
    if isinstance(want, np.ndarray):
        return (
            isinstance(got, np.ndarray)
            and got.dtype == want.dtype
            and got.shape == want.shape
            and got.flags.c_contiguous
            and np.array_equal(got, want)
        )
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and list(got) == list(want)
            and all(same(got[k], want[k]) for k in want)
        )
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(same(g, w) for g, w in zip(got, want, strict=True))
        )
    return type(got) is type(want) and got == want


def request(image: Any, task: str = "pick up the cup", **cameras: Any) -> dict[str, Any]:
    images = {"wrist": image, **cameras}
    return {
        "input": {
            "task": task,
            "observation": {"images": images, "state": [0.0, 0.5, -1.0]},
            "parameters": {"seed": 7, "guidance_scale": 2.0},
        }
    }


DUMPS: dict[str, Callable[[Any], bytes]] = {
    "json default": lambda obj: json.dumps(obj).encode(),
    "json compact": lambda obj: json.dumps(obj, separators=(",", ":")).encode(),
    "json indent": lambda obj: json.dumps(obj, indent=2).encode(),
    "json utf-8": lambda obj: json.dumps(obj, ensure_ascii=False).encode(),
    "json tabs": lambda obj: json.dumps(obj, indent="\t", separators=(" ,\r\n", " :  ")).encode(),
    "orjson": orjson.dumps,
    "orjson indent": lambda obj: orjson.dumps(obj, option=orjson.OPT_INDENT_2),
}

images = hnp.arrays(
    np.uint8,
    st.tuples(st.integers(1, 7), st.integers(1, 7), st.sampled_from([1, 2, 3, 4, 5, 12])),
)


@pytest.mark.parametrize("dumps", DUMPS.values(), ids=DUMPS.keys())
@given(image=images, task=TEXT, other=images)
@settings(max_examples=60, deadline=None)
def test_regular_images_match_pixel_list_to_array(
    dumps: Any, image: np.ndarray, task: str, other: np.ndarray
) -> None:
    obj = request(image.tolist(), task, left=other.tolist())
    body = dumps(obj)
    got = fast(body)
    reference = json.loads(body)
    for name, source in [("wrist", image), ("left", other)]:
        array = got["input"]["observation"]["images"][name]
        want = pixel_list_to_array(reference["input"]["observation"]["images"][name])
        assert isinstance(array, np.ndarray) and array.dtype == np.uint8
        assert array.shape == want.shape == source.shape
        assert np.array_equal(array, want)
    assert same(got, expected(reference))


def test_real_camera_frames_with_default_min_bytes() -> None:
    from vla_client.cameras.scene import synthetic_frames

    frames = synthetic_frames(height=40, width=64)
    body = json.dumps(request(frames["wrist"].tolist(), left=frames["left"].tolist())).encode()
    new, arrays = extract_pixel_lists(body)
    assert len(arrays) == 2 and len(new) < 1000
    got = restore_placeholders(orjson.loads(new), arrays)
    for name in ("wrist", "left"):
        array = got["input"]["observation"]["images"][name]
        assert np.array_equal(array, frames[name]) and array.flags.writeable


def test_small_lists_are_left_to_the_general_path() -> None:
    body = json.dumps(request([[[1, 2, 3]]])).encode()
    assert extract_pixel_lists(body) == (body, {})
    assert extract_pixel_lists(body, min_bytes=0)[1]


# Contract section 7: everything SGLang does not turn into uint8 through bytes(chain(...)) must
# stay in the body untouched; so must the one uint8 quirk (a bool after an int) the fast path
# cannot see.
OUTCOMES: dict[str, Any] = {
    "floats in [0,1]": [[[0.0, 0.5, 1.0], [0.25, 0.75, 1.0]]],
    "float first": [[[0.5, 2, 3]]],
    "int first, float later": [[[1, 2.5, 3]]],
    "integral float": [[[1.0, 2, 3]]],
    "out of range": [[[256, 0, 0]]],
    "negative": [[[-1, 0, 0]]],
    "huge int": [[[2**70, 1, 2]]],
    "four digits": [[[1000, 1, 2]]],
    "bool first": [[[True, False, True]]],
    "bool later (uint8 quirk)": [[[1, True, 0]]],
    "ragged rows": [[[1, 2, 3], [4, 5, 6]], [[7, 8, 9]]],
    "ragged channels": [[[1, 2, 3], [4, 5]]],
    "ragged channels, total h*w*c (uint8 quirk)": [[[1, 2], [3]], [[4, 5, 6], [7, 8]]],
    "ragged float": [[[0.1, 0.2], [0.3]]],
    "str elements": [[["a", "b", "c"]]],
    "str among ints": [[[1, "2", 3]]],
    "None element": [[[None, 1, 2]]],
    "pixel one level deeper": [[[1, 2, 3], [4, 5, [6]]]],
    "pixel not a list": [[[1, 2, 3], 4]],
    "row not a list": [[[1, 2, 3]], 4],
    "2-level": [[1, 2, 3], [4, 5, 6]],
    "1-level": [1, 2, 3],
    "empty": [],
    "empty row list": [[]],
    "empty pixel": [[[]]],
    "empty pixel later": [[[1], []]],
    "4-level batch": [[[[1, 2, 3]]], [[[4, 5, 6]]]],
    "4-level single": [[[[1, 2, 3]]]],
    "dict element": [[[{"a": 1}, 2, 3]]],
    "dict": {"b64_json": "AAAA"},
    "scalar": 5,
}


@pytest.mark.parametrize("dumps", DUMPS.values(), ids=DUMPS.keys())
@pytest.mark.parametrize("value", OUTCOMES.values(), ids=OUTCOMES.keys())
def test_outcome_table_rows_stay_in_the_body(dumps: Any, value: Any) -> None:
    try:
        body = dumps(request(value, "[[[1,2,3]]]"))
    except TypeError:
        pytest.skip("orjson cannot write ints beyond 64 bits")
    new, arrays = extract_pixel_lists(body, min_bytes=0)
    assert (new, arrays) == (body, {})
    for loads in LOADS.values():
        got = restore_placeholders(loads(new), arrays)
        assert same(got, loads(body))


@pytest.mark.parametrize(
    ("raw", "taken"),
    [
        (b"[[[0,-0,0]]]", False),
        (b"[[[1e2,0,0]]]", False),
        (b"[[[1E2,0,0]]]", False),
        (b"[[[1,0.0,0]]]", False),
        (b"[[[1,2,3],[4,5,6],[7,8,9]]]", True),
        (b"[ [ [ 1 ,\t0\n,0\r] ] ]", True),
        (b"[\n[\n[\n255\n]\n]\n]", True),
    ],
)
def test_raw_spellings(raw: bytes, taken: bool) -> None:
    """Hand-written spellings: signs, exponents and fractions stay for the parser; any JSON
    whitespace between tokens is fine."""
    body = b'{"input": {"observation": {"images": {"wrist": ' + raw + b"}}}}"
    new, arrays = extract_pixel_lists(body, min_bytes=0)
    assert bool(arrays) == taken
    assert taken or new == body
    for loads in LOADS.values():
        got = restore_placeholders(loads(new), arrays)["input"]["observation"]["images"]["wrist"]
        want = pixel_list_to_array(loads(body)["input"]["observation"]["images"]["wrist"])
        assert same(pixel_list_to_array(got), want)


@pytest.mark.parametrize(
    "value",
    [
        [[[1, 2, 3]] * 40] * 40 + [[[1, 2, 3]] * 39 + [[1, 2]]],
        [[[1, 2, 3]] * 40] * 40 + [[[1, 2, 3]] * 39 + [[1, 2, 256]]],
        [[[1, 2, 3]] * 40] * 40 + [[[1, 2, 3]] * 39 + [[1, 2, 3.5]]],
        [[[1, 2, 3]] * 40] * 40 + [[[1, 2, 3]] * 39 + [[1, 2, None]]],
        [[[1, 2, 3]] * 40] * 40 + [[[1, 2, 3]] * 39],
        [[[1, 2, 3]] * 40] * 40 + [[[1, 2, 3]] * 39 + [[1, 2, 3, 4]]],
        [[[1, 2, 3]] * 40] * 40 + [[[1, 2, 3]] * 39 + [[1, 2, [3]]]],
        [[[[1, 2, 3]] * 40] * 40] * 2,
    ],
    ids=["ragged channels", "256", "float", "None", "ragged row", "4 channels", "deeper", "batch"],
)
def test_large_irregular_lists_stay_in_the_body(value: Any) -> None:
    body = json.dumps(request(value)).encode()
    assert len(body) > 4096
    assert extract_pixel_lists(body) == (body, {})


@pytest.mark.parametrize(
    "raw",
    [b"[[[01,2,3]]]", b"[[[00,2,3]]]", b"[[[1,2,3]]],", b"[[[1,2 3]]]", b"[[[1,,2]]]", b"[[[1]]]]"],
)
def test_invalid_json_stays_invalid(raw: bytes) -> None:
    body = b'{"input": {"observation": {"images": {"wrist": ' + raw + b"}}}}"
    new, _ = extract_pixel_lists(body, min_bytes=0)
    for loads in LOADS.values():
        with pytest.raises(ValueError):
            loads(body)
        with pytest.raises(ValueError):
            loads(new)


@pytest.mark.parametrize(
    "task",
    [
        "[[[1,2,3]]]",
        ': [[[1,2,3]]], "left": [[[4,5,6]]]',
        '\\": [[[1,2,3]]]',
        '\\\\": [[[1,2,3]]]',
        '\\\\\\": [[[1,2,3]]]',
        "\\",
        "{[[[1]]]}",
        "a: [[[7]]]",
    ],
)
def test_brackets_inside_strings_are_not_lists(task: str) -> None:
    image = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    for dumps in DUMPS.values():
        obj = request(image.tolist(), task, **{task: [[[9, 9, 9]]]})
        body = dumps(obj)
        new, arrays = extract_pixel_lists(body, min_bytes=0)
        assert len(arrays) == 2
        got = restore_placeholders(orjson.loads(new), arrays)
        assert got["input"]["task"] == task
        assert same(got, expected(json.loads(body)))


def test_bracket_string_as_whole_value() -> None:
    body = b'{"a": "[[[1,2,3]]]", "b": ": [[[1,2,3]]]", "c": [[[1,2,3]]]}'
    new, arrays = extract_pixel_lists(body, min_bytes=0)
    got = restore_placeholders(orjson.loads(new), arrays)
    assert got["a"] == "[[[1,2,3]]]" and got["b"] == ": [[[1,2,3]]]"
    assert same(got["c"], np.array([[[1, 2, 3]]], np.uint8))


def test_many_cameras_in_one_body() -> None:
    rng = np.random.default_rng(0)
    cams = {f"cam{i}": rng.integers(0, 256, (5 + i, 3 + i, 3), np.uint8) for i in range(6)}
    obj = {
        "input": {
            "observation": {
                "images": {k: v.tolist() for k, v in cams.items()},
                "observation.images.top": cams["cam0"].tolist(),
                "state": [0.1] * 8,
            },
            "image": [cams["cam1"].tolist(), cams["cam2"].tolist()],
            "noise": [[[0.5, 0.25]]],
        }
    }
    body = json.dumps(obj).encode()
    new, arrays = extract_pixel_lists(body, min_bytes=0)
    assert len(arrays) == 7  # list elements under "image" are left to the general path
    got = restore_placeholders(orjson.loads(new), arrays)
    assert same(got, expected(json.loads(body)))
    for k, v in cams.items():
        assert np.array_equal(got["input"]["observation"]["images"][k], v)


@pytest.mark.parametrize("dumps", DUMPS.values(), ids=DUMPS.keys())
def test_whole_body_pixel_list(dumps: Any) -> None:
    image = np.arange(60, dtype=np.uint8).reshape(4, 5, 3)
    body = dumps(image.tolist())
    got = fast(body)
    assert same(got, pixel_list_to_array(json.loads(body)))


def test_placeholders_are_not_spoofable() -> None:
    spoof = f"{PREFIX}0"
    obj = request(np.zeros((2, 2, 3), np.uint8).tolist(), spoof, left=[spoof])
    body = json.dumps(obj).encode()
    got = fast(body)
    assert got["input"]["task"] == spoof
    assert got["input"]["observation"]["images"]["left"] == [spoof]
    _, first = extract_pixel_lists(body, min_bytes=0)
    _, second = extract_pixel_lists(body, min_bytes=0)
    assert set(first).isdisjoint(second)


def test_restore_without_arrays_returns_object() -> None:
    obj = {"a": [1, 2]}
    assert restore_placeholders(obj, {}) is obj


def test_deeply_nested_body() -> None:
    """The restore walk is not recursive: 900 levels (orjson allows 1024) are fine."""
    image = np.arange(4 * 4 * 3, dtype=np.uint8).reshape(4, 4, 3)
    pixels = json.dumps(image.tolist()).encode()
    body = b'{"wrist": ' + pixels + b', "deep": ' + b'{"a": [' * 450 + b"{}" + b"]}" * 450 + b"}"
    got = fast(body)
    assert same(got["wrist"], image)
    node = got["deep"]
    for _ in range(450):
        node = node["a"][0]
    assert node == {}


def test_no_lists_at_all() -> None:
    for body in [b"", b"{}", b'{"a": 1}', b"[]", b"   ", b'"x"', b"123"]:
        assert extract_pixel_lists(body, min_bytes=0) == (body, {})


# Random JSON documents: pixel lists (regular or slightly broken) anywhere among other values.
leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-300, 300),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)


@st.composite
def pixel_lists(draw: st.DrawFn) -> Any:
    value = draw(images).tolist()
    if draw(st.booleans()):
        h = draw(st.integers(0, len(value) - 1))
        w = draw(st.integers(0, len(value[h]) - 1))
        pixel = value[h][w]
        action = draw(st.integers(0, 5))
        if action == 0:
            pixel[draw(st.integers(0, len(pixel) - 1))] = draw(leaf)
        elif action == 1:
            pixel.append(draw(st.integers(0, 255)))
        elif action == 2:
            value[h].pop(w)
        elif action == 3:
            pixel.clear()
        elif action == 4:
            value[h][w] = draw(leaf)
        else:
            value = [value]
    return value


documents = st.recursive(
    st.one_of(leaf, pixel_lists()),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(TEXT, pixel_lists() | inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.parametrize("loads", LOADS.values(), ids=LOADS.keys())
@given(doc=documents, dumps=st.sampled_from(list(DUMPS.values())))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_documents(loads: Any, doc: Any, dumps: Any) -> None:
    try:
        body = dumps(doc)
    except TypeError:
        return  # orjson cannot write ints beyond 64 bits
    assert same(fast(body, loads=loads), expected(loads(body)))

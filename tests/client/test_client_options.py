"""Every client option is checked when given: a wrong value raises naming what is allowed."""

from __future__ import annotations

import functools
import re
from typing import Any

import pytest
from client_kit import to_droid

from vla_client import ActionClient, AsyncActionClient, ClientOptions
from vla_client.protocol import openpi_layout
from vla_client.transports import HTTPTransport, WebSocketTransport

URL = "http://127.0.0.1:1"


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"encoding": "webp"}, "encoding must be one of 'png', 'jpeg', 'raw', 'pixels'"),
        ({"wire": "xml"}, "wire must be one of 'json', 'msgpack'"),
        ({"transport": "grpc"}, "transport must be one of 'http', 'websocket'"),
        ({"endpoint": "pi0"}, "endpoint must be one of 'realtime', 'openpi'"),
        ({"layout": "bridge"}, "openpi layout must be one of 'flat', 'droid'"),
        ({"resize": "stretch"}, "resize must be one of 'auto', 'pad', 'crop', 'none'"),
        ({"timeout_s": 0}, "timeout_s must be a number > 0"),
        ({"timeout_s": -1.5}, "timeout_s must be a number > 0"),
        ({"timeout_s": None}, "timeout_s must be a number > 0; got None"),
        ({"deadline_s": 0}, "deadline_s must be a number > 0"),
        ({"max_observation_age_s": float("nan")}, "max_observation_age_s must be a number"),
        ({"jpeg_quality": 0}, "jpeg_quality must be in 1..100"),
        ({"jpeg_quality": 101}, "jpeg_quality must be in 1..100"),
        ({"api_key": ""}, "api_key must be a non-empty string"),
        ({"api_key": "  "}, "api_key must be a non-empty string"),
        ({"check_contract": "yes"}, "check_contract must be True or False"),
        ({"camera_map": {"a": ""}}, "camera_map must map camera names"),
        ({"transport": "http", "endpoint": "openpi"}, "does not apply to HTTP"),
        ({"wire": "json", "transport": "websocket"}, "websocket frames are msgpack"),
    ],
)
@pytest.mark.parametrize("client", [ActionClient, AsyncActionClient])
def test_a_bad_option_is_refused_naming_the_choices(
    client: type, options: dict[str, Any], said: str
) -> None:
    with pytest.raises(ValueError, match=said.replace("(", r"\(").replace(".", r"\.")):
        client(URL, **options)


@pytest.mark.parametrize("url", ["ftp://h:1", "127.0.0.1:8000", "http://", ""])
def test_a_url_the_client_cannot_speak_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="base_url"):
        ActionClient(url)


def test_a_retry_policy_must_be_one() -> None:
    with pytest.raises(TypeError, match="RetryPolicy"):
        ActionClient(URL, retry=3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "said"),
    [({"timeout_s": 0}, "timeout_s"), ({"connect_timeout_s": -1}, "connect_timeout_s"),
     ({"max_reply_bytes": 0}, "max_reply_bytes"), ({"max_reply_bytes": 2.5}, "max_reply_bytes"),
     ({"max_reply_bytes": True}, "max_reply_bytes")],
)  # fmt: skip
def test_the_transports_check_their_options(options: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        WebSocketTransport("ws://127.0.0.1:1", **options)
    if "connect" not in said:
        with pytest.raises(ValueError, match=said):
            HTTPTransport(URL, **options)
        with pytest.raises(ValueError, match=said):
            ActionClient(URL, **options)


def test_max_reply_bytes_is_not_dropped_for_a_transport_passed_in() -> None:
    with pytest.raises(ValueError, match="set it on the transport passed in"):
        ActionClient(URL, transport=HTTPTransport(URL), max_reply_bytes=4096)


@pytest.mark.parametrize("client", [ActionClient, AsyncActionClient])
def test_options_in_one_value_are_the_keywords_in_one_place(client: type) -> None:
    """``options=ClientOptions(...)`` and the same keywords give the same client options, the
    transport's defaults (websockets carry msgpack, openpi raw arrays) filled in alike."""
    ws = "ws://127.0.0.1:1"
    chosen = {"encoding": "jpeg", "jpeg_quality": 70, "deadline_s": 0.5, "resize": "none"}
    assert client(URL, options=ClientOptions(**chosen)).options == client(URL, **chosen).options
    by_value = client(ws, endpoint="openpi", options=ClientOptions(layout="droid"))
    by_keyword = client(ws, endpoint="openpi", layout="droid")
    assert by_value.options == by_keyword.options
    assert (by_value.options.wire, by_value.options.encoding) == ("msgpack", "raw")
    assert by_value.options.layout is openpi_layout("droid")
    assert client(ws, options=ClientOptions(layout="libero")).transport.endpoint == "openpi"


def test_options_given_both_ways_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="deadline_s, resize given as keywords beside options="):
        ActionClient(URL, options=ClientOptions(), deadline_s=1.0, resize="pad")


@pytest.mark.parametrize("client", [ActionClient, AsyncActionClient])
@pytest.mark.parametrize(
    ("keyword", "name"),
    [
        ({"check_contract": True}, "check_contract"),  # each its default value: given all the same
        ({"resize": "auto"}, "resize"),
        ({"jpeg_quality": 90}, "jpeg_quality"),
        ({"encoding": None}, "encoding"),
        ({"camera_map": {}}, "camera_map"),
    ],
)
def test_a_keyword_beside_options_is_refused_whatever_its_value(
    client: type, keyword: dict[str, Any], name: str
) -> None:
    """Giving a setting both ways is refused even when the keyword names the default, which
    `options` would otherwise override without a word (hostile round 3)."""
    with pytest.raises(ValueError, match=f"^{name} given as keywords beside options="):
        client(URL, options=ClientOptions(check_contract=False), **keyword)


def test_a_keyword_passed_on_by_a_factory_is_refused_beside_options() -> None:
    """A robot's factory that fills in keywords (here `functools.partial`) and a caller that
    passes options: the two settings meet in one call, which is refused."""
    make = functools.partial(ActionClient, URL, check_contract=True)
    with pytest.raises(ValueError, match="check_contract given as keywords beside options="):
        make(options=ClientOptions(check_contract=False))
    assert make().options.check_contract is True
    with pytest.raises(TypeError, match="options must be a ClientOptions, got dict"):
        ActionClient(URL, options={"encoding": "png"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"encoding": "webp"},
         "encoding must be one of 'png', 'jpeg', 'raw', 'pixels'; got 'webp'"),
        ({"layout": "bridge"}, "openpi layout must be one of"),
        ({"layout": 3}, "layout must be a layout name, an OpenpiLayout or a function, got 3"),
        ({"layout": "droid", "encoding": "png"},
         "openpi layout 'droid' sends raw arrays, as openpi's policies read them; encoding must "
         "be 'raw', got 'png'"),
        ({"layout": "flat", "wire": "json"}, "openpi requests travel as msgpack only"),
        ({"state_split": {}}, "state_split maps state keys to their lengths, got {}"),
        ({"image_size": (224,)}, "image_size must be (height, width), got (224,)"),
        ({"image_size": (224, 224, 3)}, "image_size must be (height, width), got (224, 224, 3)"),
        ({"image_size": (224.0, 224)}, "image_size must be (height, width), got (224.0, 224)"),
        ({"image_size": (224, 7)}, "image_size (224, 7) is under 8 pixels a side"),
        ({"jpeg_quality": True}, "jpeg_quality must be in 1..100, got True"),
    ],
)  # fmt: skip
def test_client_options_check_each_value_when_made(options: dict[str, Any], said: str) -> None:
    with pytest.raises((ValueError, TypeError), match="^" + re.escape(said)):
        ClientOptions(**options)


@pytest.mark.parametrize(
    "options",
    [
        {"image_size": (8, 8)},
        {"image_size": (224, 320)},
        {"jpeg_quality": 1},
        {"jpeg_quality": 100},
        {"layout": to_droid, "encoding": "png", "wire": "msgpack"},
        {"layout": openpi_layout("droid"), "encoding": "raw"},
        {"layout": "flat", "encoding": "jpeg"},
        {"state_split": {"arm": 6, "gripper": 1}},
    ],
)
def test_client_options_take_each_value_at_its_edge(options: dict[str, Any]) -> None:
    """The smallest image and JPEG quality allowed, the largest quality, a layout of each kind
    (a function or the flat layout with any encoding, a layout object of raw arrays)."""
    made = ClientOptions(**options)
    assert {name: getattr(made, name) for name in options} == options

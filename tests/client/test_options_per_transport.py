"""`ClientOptions` resolved for each transport, by a client when it is made and by
`ClientOptions.for_transport`: the transport's defaults filled in where nothing was given,
every value given kept as given, and what the transport cannot carry refused with a
`ValueError` that says what it takes, never replaced by something it can."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from client_kit import closed, exactly, to_droid

from vla_client import ActionClient, AsyncActionClient, ClientOptions
from vla_client.client.options import fill_in
from vla_client.protocol import OpenpiLayout, openpi_layout
from vla_client.protocol.families import roboarena, vllm_omni

HTTP, WS, TCP = "http://127.0.0.1:1", "ws://127.0.0.1:1", "tcp://127.0.0.1:1"
FLAT, DROID = openpi_layout("flat"), openpi_layout("droid")
VLLM, ROBOARENA = vllm_omni.NAME, roboarena.NAME


def make(client: str, url: str, **keywords: Any) -> Any:
    """A client made `client`'s way: directly, as a robot's factory would, or the async one."""
    if client == "factory":
        return functools.partial(ActionClient, url, check_contract=False)(**keywords)
    return {"sync": ActionClient, "async": AsyncActionClient}[client](url, **keywords)


CLIENTS = ["sync", "async", "factory"]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    ("url", "keywords", "filled"),
    [
        (HTTP, {}, ("png", "json", None)),
        (WS, {}, ("png", "msgpack", None)),
        (WS, {"endpoint": "openpi"}, ("raw", "msgpack", FLAT)),
        (WS, {"layout": "droid"}, ("raw", "msgpack", DROID)),
        (WS, {"layout": DROID}, ("raw", "msgpack", DROID)),
        (WS, {"layout": to_droid}, ("raw", "msgpack", to_droid)),
        (TCP, {}, ("raw", "msgpack", None)),
        (WS, {"endpoint": "vllm_omni"}, ("raw", "msgpack", None)),
        (WS, {"endpoint": "roboarena"}, ("raw", "msgpack", None)),
        ("ipc://{tmp}/server.sock", {}, ("raw", "msgpack", None)),
    ],
    ids=["http", "ws", "openpi", "openpi-droid-named", "openpi-droid", "openpi-function",
         "gr00t", "vllm_omni", "roboarena", "ipc"],
)  # fmt: skip
def test_each_transport_fills_in_its_own_defaults(
    client: str, url: str, keywords: dict[str, Any], filled: tuple[Any, ...], tmp_path: Path
) -> None:
    made = make(client, url.format(tmp=tmp_path), **keywords)
    try:
        options = made.options
        assert (options.encoding, options.wire) == filled[:2]
        assert options.layout is filled[2]
    finally:
        closed(made)


@pytest.mark.parametrize("client", CLIENTS)
def test_each_option_given_is_kept_as_given(client: str) -> None:
    """Every option at a value other than its default comes through the client unchanged."""
    chosen = ClientOptions(
        encoding="jpeg", wire="msgpack", jpeg_quality=1, max_observation_age_s=0.25,
        deadline_s=1.5, camera_map={"wrist": "right"}, resize="crop", image_size=(96, 128),
        check_contract=False,
    )  # fmt: skip
    if client == "factory":  # a factory's caller gives keywords, the factory adds its own
        made = make(client, WS, **{name: getattr(chosen, name) for name in KEPT})
    else:
        made = make(client, WS, options=chosen)
    try:
        assert made.options == chosen
    finally:
        closed(made)
    gr00t = ClientOptions(state_split={"arm": 6, "gripper": 1}, deadline_s=2.0)
    with ActionClient(TCP, options=gr00t) as over_zmq:
        assert over_zmq.options == ClientOptions(
            state_split={"arm": 6, "gripper": 1}, deadline_s=2.0, encoding="raw", wire="msgpack"
        )


KEPT = ("encoding", "wire", "jpeg_quality", "max_observation_age_s", "deadline_s", "camera_map",
        "resize", "image_size", "check_contract")  # fmt: skip


@pytest.mark.parametrize(
    ("url", "keywords", "said"),
    [
        (WS, {"wire": "json"},
         "websocket frames are msgpack; leave wire unset or pass wire='msgpack'"),
        (WS, {"endpoint": "realtime", "layout": "droid"},
         "layout is for openpi's endpoint; pass endpoint='openpi' as well"),
        (HTTP, {"state_split": {"arm": 6}},
         "state_split is for GR00T's server; pass endpoint='gr00t' as well"),
        (TCP, {"encoding": "png"},
         "GR00T's server takes raw arrays in its own msgpack; leave ['encoding'] unset"),
        (WS, {"endpoint": "vllm_omni", "wire": "msgpack"},
         f"{VLLM} takes raw arrays in its own msgpack; leave ['wire'] unset"),
        (WS, {"endpoint": "roboarena", "encoding": "raw", "wire": "msgpack"},
         f"{ROBOARENA} takes raw arrays in its own msgpack; leave ['encoding', 'wire'] unset"),
        ("ipc://{tmp}/server.sock", {"encoding": "png"},
         "ipc:// carries raw frames in shared memory and the rest as msgpack; leave encoding "
         "and wire unset (got encoding='png', wire=None)"),
        ("ipc://{tmp}/server.sock", {"wire": "json"},
         "ipc:// carries raw frames in shared memory and the rest as msgpack; leave encoding "
         "and wire unset (got encoding=None, wire='json')"),
    ],
    ids=["ws-json", "realtime-layout", "http-state_split", "gr00t-encoding", "vllm_omni-wire",
         "roboarena-both", "ipc-png", "ipc-json"],
)  # fmt: skip
@pytest.mark.parametrize("client", CLIENTS)
def test_an_option_the_transport_cannot_carry_is_refused_saying_what_it_takes(
    client: str, url: str, keywords: dict[str, Any], said: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=exactly(said)):
        make(client, url.format(tmp=tmp_path), **keywords)


@pytest.mark.parametrize(
    ("transport", "filled"),
    [
        ({}, ("png", "json", None)),
        ({"websocket": True}, ("png", "msgpack", None)),
        ({"websocket": True, "openpi": True}, ("raw", "msgpack", FLAT)),
        ({"gr00t": True}, ("raw", "msgpack", None)),
        ({"dialect": VLLM, "websocket": True}, ("raw", "msgpack", None)),
        ({"dialect": "a server of its own"}, ("raw", "msgpack", None)),
        ({"ipc": True}, ("raw", "msgpack", None)),
    ],
)
def test_for_transport_fills_in_each_transports_defaults(
    transport: dict[str, Any], filled: tuple[Any, ...]
) -> None:
    given = {"websocket": False, "openpi": False, **transport}
    options = ClientOptions(deadline_s=3.0).for_transport(**given)
    assert (options.encoding, options.wire, options.layout) == filled
    assert options.deadline_s == 3.0
    if not {"gr00t", "dialect", "ipc"} & set(transport):  # fill_in's own defaults alike
        assert fill_in(ClientOptions(deadline_s=3.0), **given) == options


@pytest.mark.parametrize(
    ("options", "transport", "said"),
    [
        ({"state_split": {"arm": 6}}, {},
         "state_split is for GR00T's server; pass endpoint='gr00t' as well"),
        ({"layout": "droid"}, {"gr00t": True},
         "GR00T's server takes raw arrays in its own msgpack; leave ['layout'] unset"),
        ({"encoding": "raw", "wire": "msgpack", "layout": "flat"}, {"dialect": ROBOARENA},
         f"{ROBOARENA} takes raw arrays in its own msgpack; leave ['encoding', 'wire', 'layout']"
         " unset"),
        ({"encoding": "jpeg"}, {"dialect": "a server of its own"},
         "a server of its own takes raw arrays in its own msgpack; leave ['encoding'] unset"),
        ({"layout": "droid"}, {"ipc": True},
         "ipc:// speaks the action API; layout is for openpi's endpoint"),
        ({"layout": to_droid}, {"websocket": True},
         "layout is for openpi's endpoint; pass endpoint='openpi' as well"),
    ],
)  # fmt: skip
def test_for_transport_refuses_what_the_transport_cannot_carry(
    options: dict[str, Any], transport: dict[str, Any], said: str
) -> None:
    with pytest.raises(ValueError, match=exactly(said)):
        ClientOptions(**options).for_transport(**{"websocket": False, "openpi": False, **transport})


def test_what_a_transport_takes_as_given_is_accepted() -> None:
    """The values a transport would fill in, given outright, are not refused; GR00T's options
    are taken when its family is named by its label as well as by ``gr00t=True``."""
    raw = ClientOptions(encoding="raw", wire="msgpack")
    assert raw.for_transport(websocket=False, openpi=False, ipc=True) == raw
    split = ClientOptions(state_split={"arm": 7})
    named = split.for_transport(websocket=False, openpi=False, dialect="GR00T's server")
    assert (named.state_split, named.encoding, named.wire) == ({"arm": 7}, "raw", "msgpack")
    assert split.for_transport(websocket=False, openpi=False, gr00t=True).state_split == {"arm": 7}
    layout = OpenpiLayout("mine", (), "image/{camera}", ())
    mine = ClientOptions(layout=layout).for_transport(websocket=True, openpi=True)
    assert mine.layout is layout

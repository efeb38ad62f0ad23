"""GR00T's messages without a server: the address, the msgpack and its arrays, the modality
config and the metadata read from it, the observation built for a config, and the reply read
back; each refusal by its whole message (tests/client/test_gr00t.py runs the same code against a
GR00T server over real ZeroMQ)."""

from __future__ import annotations

import io
from typing import Any

import msgpack
import numpy as np
import pytest

from vla_client.errors import ContractError, ProtocolError, ServerError
from vla_client.observation import Observation
from vla_client.protocol.families import gr00t
from vla_client.protocol.metadata_fields import MAX_METADATA_CAMERAS, MAX_METADATA_DIM

FRAME = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)


def config(**changes: Any) -> gr00t.Gr00tConfig:
    """A config with three state parts (so a split's offsets past the second part are checked)
    and two action parts."""
    fields: dict[str, Any] = {
        "video_keys": ("front",),
        "state_keys": ("arm", "hand", "grip"),
        "action_keys": ("arm", "grip"),
        "language_key": "task",
        "video_steps": 1,
        "state_steps": 1,
        "action_horizon": 2,
    }
    return gr00t.Gr00tConfig(**{**fields, **changes})


SPLIT = {"arm": 2, "hand": 3, "grip": 1}


# -- the address ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("tcp://gpu-box", "tcp://gpu-box:5555"),
        ("tcp://gpu-box:6000/", "tcp://gpu-box:6000"),
        ("tcp://[::1]", "tcp://[::1]:5555"),
        ("tcp://[fe80::2]:7000", "tcp://[fe80::2]:7000"),
    ],
)
def test_the_address_has_a_port_and_brackets_an_ipv6_host(url: str, address: str) -> None:
    assert gr00t.zmq_address(url) == address


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://gpu-box:5555", "GR00T's server is at tcp://host:port, got 'http://gpu-box:5555'"),
        ("tcp://:5555", "GR00T's server is at tcp://host:port, got 'tcp://:5555'"),
        ("http://", "GR00T's server is at tcp://host:port, got 'http://'"),
        ("tcp://gpu-box/x", "a tcp:// address has no path or query, got 'tcp://gpu-box/x'"),
        ("tcp://gpu-box//", "a tcp:// address has no path or query, got 'tcp://gpu-box//'"),
        ("tcp://gpu-box?a=1", "a tcp:// address has no path or query, got 'tcp://gpu-box?a=1'"),
        ("tcp://gpu-box:99999", "the port must be in 1..65535, got 'tcp://gpu-box:99999'"),
    ],
)
def test_an_address_gr00t_cannot_serve_is_refused_by_name(url: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        gr00t.zmq_address(url)
    assert str(refused.value) == message


# -- msgpack and its arrays -------------------------------------------------------------------


def test_arrays_travel_as_their_npy_bytes_and_come_back_equal() -> None:
    state = np.linspace(0, 1, 6, dtype=np.float32).reshape(1, 1, 6)
    data = gr00t.packb({"video": FRAME, "state": state, "name": "b\xe9", "raw": b"\x00\x01"})
    document = msgpack.unpackb(data, raw=False)
    saved = io.BytesIO()
    np.save(saved, FRAME, allow_pickle=False)
    assert document["video"] == {"__ndarray_class__": True, "as_npy": saved.getvalue()}
    assert document["raw"] == b"\x00\x01"  # bytes as bin, not as a string
    back = gr00t.unpackb(data)
    assert back["video"].dtype == np.uint8 and np.array_equal(back["video"], FRAME)
    assert back["state"].dtype == np.float32 and np.array_equal(back["state"], state)
    assert (back["name"], back["raw"]) == ("b\xe9", b"\x00\x01")


def test_a_map_with_number_keys_and_a_modality_config_object_are_read() -> None:
    data = msgpack.packb(
        {1: "one", "config": {"__ModalityConfig_class__": True, "as_json": {"delta_indices": [0]}}}
    )
    assert gr00t.unpackb(data) == {1: "one", "config": {"delta_indices": [0]}}


def test_an_object_array_is_neither_sent_nor_unpickled_from_a_reply() -> None:
    with pytest.raises(ValueError, match="allow_pickle=False"):
        gr00t.packb({"x": np.array([{"a": 1}], dtype=object)})
    pickled = io.BytesIO()
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    reply = msgpack.packb({"x": {"__ndarray_class__": True, "as_npy": pickled.getvalue()}})
    with pytest.raises(ProtocolError) as refused:
        gr00t.unpackb(reply)
    assert str(refused.value).startswith("GR00T's reply is not a message it sends (ValueError: ")


def test_what_is_not_an_array_or_msgpack_value_is_not_sent() -> None:
    with pytest.raises(TypeError) as refused:
        gr00t.packb({"x": {1, 2}})
    assert str(refused.value) == "cannot send a value of type set to GR00T's server"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            msgpack.packb({"__ndarray_class__": True, "as_npy": "text"}),
            "an array in GR00T's reply has no as_npy bytes",
        ),
        (
            msgpack.packb({"__ndarray_class__": True}),
            "an array in GR00T's reply has no as_npy bytes",
        ),
        (b"\xc1", "GR00T's reply is not a message it sends (FormatError)"),
        (
            b"\x92\x01",
            "GR00T's reply is not a message it sends (ValueError: Unpack failed: incomplete input)",
        ),
    ],
)
def test_bytes_that_are_not_gr00t_messages_are_refused_by_name(data: bytes, message: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        gr00t.unpackb(data)
    assert str(refused.value) == message


def test_a_map_that_only_looks_like_an_array_is_a_map() -> None:
    document = {"__ndarray_class__": 1, "as_npy": b"x"}  # the marker must be true
    assert gr00t.unpackb(msgpack.packb(document)) == document


# -- requests and answers ---------------------------------------------------------------------


def test_a_request_carries_data_and_a_token_only_when_given() -> None:
    assert msgpack.unpackb(gr00t.message("ping")) == {"endpoint": "ping"}
    assert msgpack.unpackb(gr00t.message("reset", {"options": None}, api_token="k")) == {
        "endpoint": "reset",
        "data": {"options": None},
        "api_token": "k",
    }
    assert msgpack.unpackb(gr00t.message("kill", {}, api_token="")) == {
        "endpoint": "kill",
        "data": {},
    }


@pytest.mark.parametrize(
    ("data", "status", "detail"),
    [
        (b"ERROR", 500, "the server answered ERROR; is it GR00T's policy server?"),
        (gr00t.packb({"error": "Unauthorized: wrong api_token"}), 401,
         "Unauthorized: wrong api_token"),
        (gr00t.packb({"error": "no policy loaded"}), 500, "no policy loaded"),
        (gr00t.packb({"error": 7}), 500, "7"),
    ],
)  # fmt: skip
def test_an_error_answer_is_a_server_error_with_its_status(
    data: bytes, status: int, detail: str
) -> None:
    with pytest.raises(ServerError) as refused:
        gr00t.read_answer(data)
    assert (refused.value.status_code, refused.value.detail) == (status, detail)


def test_an_answer_is_its_document() -> None:
    assert gr00t.read_answer(gr00t.packb({"status": "ok"})) == {"status": "ok"}
    assert gr00t.read_answer(b"\xa5error") == "error"  # only the exact bytes ERROR are a refusal


# -- the modality config and its metadata -----------------------------------------------------


def modalities(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "video": {"modality_keys": ["front", "wrist"], "delta_indices": [0]},
        "state": {"modality_keys": ["arm", "grip"], "delta_indices": [0]},
        "action": {"modality_keys": ["arm", "grip"], "delta_indices": list(range(16))},
        "language": {"modality_keys": ["task"], "delta_indices": [0]},
    }
    return {**document, **changes}


def test_the_modality_config_is_read_into_a_config() -> None:
    assert gr00t.read_modality_config(modalities()) == gr00t.Gr00tConfig(
        ("front", "wrist"), ("arm", "grip"), ("arm", "grip"), "task", 1, 1, 16
    )
    bound = {"modality_keys": [f"k{i}" for i in range(MAX_METADATA_CAMERAS)],
             "delta_indices": list(range(MAX_METADATA_DIM))}  # fmt: skip
    at_bounds = gr00t.read_modality_config(modalities(action=bound))
    assert (len(at_bounds.action_keys), at_bounds.action_horizon) == (
        MAX_METADATA_CAMERAS,
        MAX_METADATA_DIM,
    )


@pytest.mark.parametrize(
    "block",
    [
        None,
        ["arm"],
        {"modality_keys": [], "delta_indices": [0]},
        {"modality_keys": "arm", "delta_indices": [0]},
        {"modality_keys": ["arm", ""], "delta_indices": [0]},
        {"modality_keys": ["arm", 3], "delta_indices": [0]},
        {"modality_keys": ["arm"], "delta_indices": []},
        {"modality_keys": ["arm"], "delta_indices": 0},
        {"modality_keys": ["arm"], "delta_indices": [0, True]},
        {"modality_keys": ["arm"], "delta_indices": [0.0]},
        {"modality_keys": ["arm"]},
        {"delta_indices": [0]},
    ],
)
def test_a_malformed_modality_is_refused_with_what_it_holds(block: Any) -> None:
    with pytest.raises(ProtocolError) as refused:
        gr00t.read_modality_config(modalities(state=block))
    assert str(refused.value) == (
        "GR00T's modality config 'state' needs modality_keys (names) and delta_indices "
        f"(integers), got {block!r}"
    )


@pytest.mark.parametrize(
    "block",
    [
        {"modality_keys": [f"k{i}" for i in range(MAX_METADATA_CAMERAS + 1)], "delta_indices": [0]},
        {"modality_keys": ["arm"], "delta_indices": list(range(MAX_METADATA_DIM + 1))},
    ],
)
def test_a_modality_over_the_clients_bounds_is_refused(block: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError) as refused:
        gr00t.read_modality_config(modalities(action=block))
    assert str(refused.value) == "GR00T's modality config 'action' is over the client's bounds"


def test_a_config_that_is_not_a_map_or_names_two_language_keys_is_refused() -> None:
    with pytest.raises(ProtocolError) as not_a_map:
        gr00t.read_modality_config([])
    assert str(not_a_map.value) == "GR00T's modality config must be a map, got list"
    two = {"modality_keys": ["task", "hint"], "delta_indices": [0]}
    with pytest.raises(ProtocolError) as two_keys:
        gr00t.read_modality_config(modalities(language=two))
    assert str(two_keys.value) == (
        "GR00T's policies take one language key, this one names ['task', 'hint']"
    )


@pytest.mark.parametrize(
    ("split", "state_dim"),
    [
        (SPLIT, 6),
        ({"grip": 1, "arm": 2, "hand": 3}, 6),  # any order: the keys are what must match
        ({"arm": 2, "hand": 3}, None),  # a split for other keys gives no length
        ({"arm": 2, "hand": 3, "grip": 1, "extra": 1}, None),
        (None, None),
    ],
)
def test_the_metadata_has_the_cameras_the_horizon_and_the_length_a_fitting_split_gives(
    split: dict[str, int] | None, state_dim: int | None
) -> None:
    metadata = config().metadata(split)
    assert metadata.policy_family == gr00t.POLICY_FAMILY == "gr00t"
    assert metadata.input.image_keys == ["front"]
    assert metadata.input.state_dim == state_dim
    assert metadata.output.action_horizon == 2
    assert metadata.model_dump()["gr00t"] == {
        "state_keys": ["arm", "hand", "grip"],
        "action_keys": ["arm", "grip"],
        "language_key": "task",
    }


# -- the state split --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("split", "message"),
    [
        ({}, "state_split maps state keys to their lengths, got {}"),
        ([("arm", 2)], "state_split maps state keys to their lengths, got [('arm', 2)]"),
        ({"": 2}, "state_split keys are state key names, got ''"),
        ({3: 2}, "state_split keys are state key names, got 3"),
        ({"arm": 0}, f"state_split['arm'] must be a length in 1..{MAX_METADATA_DIM}, got 0"),
        ({"arm": True}, f"state_split['arm'] must be a length in 1..{MAX_METADATA_DIM}, got True"),
        ({"arm": 2.0}, f"state_split['arm'] must be a length in 1..{MAX_METADATA_DIM}, got 2.0"),
        (
            {"arm": MAX_METADATA_DIM + 1},
            f"state_split['arm'] must be a length in 1..{MAX_METADATA_DIM}, "
            f"got {MAX_METADATA_DIM + 1}",
        ),
    ],
)
def test_a_state_split_that_cannot_cut_a_vector_is_refused(split: Any, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        gr00t.check_state_split(split)
    assert str(refused.value) == message


def test_a_state_split_is_taken_as_given_up_to_the_bound() -> None:
    assert gr00t.check_state_split(None) is None
    assert gr00t.check_state_split({"arm": 1, "grip": MAX_METADATA_DIM}) == {
        "arm": 1,
        "grip": MAX_METADATA_DIM,
    }


# -- the observation --------------------------------------------------------------------------


def test_the_observation_is_nested_with_each_state_part_at_its_offset() -> None:
    state = np.arange(6, dtype=np.float64) + 0.5
    document = gr00t.observation_document(
        Observation({"front": FRAME}, state=state, task="stack"), config(), SPLIT
    )
    assert list(document) == ["video", "state", "language"]
    assert document["video"]["front"].shape == (1, 1, 4, 5, 3)
    assert np.array_equal(document["video"]["front"][0, 0], FRAME)
    parts = document["state"]
    assert list(parts) == ["arm", "hand", "grip"]
    assert {key: part.tolist() for key, part in parts.items()} == {
        "arm": [[[0.5, 1.5]]],
        "hand": [[[2.5, 3.5, 4.5]]],
        "grip": [[[5.5]]],
    }
    assert all(part.dtype == np.float32 for part in parts.values())
    assert document["language"] == {"task": [["stack"]]}


def test_a_policy_without_state_gets_none_and_an_observation_without_a_task_an_empty_one() -> None:
    stateless = config(state_keys=())
    document = gr00t.observation_document(Observation({"front": FRAME}), stateless, None)
    assert document["state"] == {} and document["language"] == {"task": [[""]]}
    with pytest.raises(ContractError) as refused:
        gr00t.observation_document(Observation({"front": FRAME}, state=np.zeros(3)), stateless,
                                   None)  # fmt: skip
    assert str(refused.value) == (
        "state.modality_keys: the server expects no state, the observation has 3 values"
    )


@pytest.mark.parametrize(
    ("state", "split", "message"),
    [
        (
            None,
            SPLIT,
            "state.modality_keys: the server expects a state for ['arm', 'hand', 'grip'], the "
            "observation has none; give the observation the robot's state "
            "(Observation(state=...); on the command line, --state)",
        ),
        (
            np.zeros(6),
            None,
            "state.modality_keys: the server expects the state as ['arm', 'hand', 'grip'], the "
            "observation has a flat vector of 6; GR00T announces the state keys but not their "
            "lengths; say how many of the 6 values each key takes, in the vector's order: "
            "state_split={'arm': DIM, 'hand': DIM, 'grip': DIM}",
        ),
        (
            np.zeros(6),
            {"arm": 5, "grip": 1},
            "state.modality_keys: the server expects ['arm', 'grip', 'hand'], the observation has "
            "state_split for ['arm', 'grip']",
        ),
        (
            np.zeros(5),
            SPLIT,
            "state_split: the server expects 6 values ({'arm': 2, 'hand': 3, 'grip': 1}), the "
            "observation has 5 values",
        ),
    ],
)
def test_a_state_the_config_cannot_take_is_refused_before_sending(
    state: np.ndarray | None, split: dict[str, int] | None, message: str
) -> None:
    with pytest.raises(ContractError) as refused:
        gr00t.observation_document(Observation({"front": FRAME}, state=state), config(), split)
    assert str(refused.value) == message


def test_the_missing_split_error_offers_the_option_that_fixes_it() -> None:
    with pytest.raises(ContractError) as refused:
        gr00t.observation_document(Observation({"front": FRAME}, state=np.zeros(6)), config(), None)
    fix = refused.value.fix
    assert fix is not None
    (keys,) = fix.values
    assert (fix.option, list(keys)) == ("state_split", ["arm", "hand", "grip"])
    assert fix.describe(lambda option, value: f"--state-split {value}") == (
        "say how many of the 6 values each key takes, in the vector's order: "
        "--state-split {'arm': DIM, 'hand': DIM, 'grip': DIM}"
    )


def test_a_state_of_one_value_per_key_needs_no_split() -> None:
    """Each key takes at least one value, so three values for three keys cut one way only."""
    state = np.array([0.5, -1.0, 2.0])
    observation = Observation({"front": FRAME}, state=state)
    document = gr00t.observation_document(observation, config(), None)
    assert list(document["state"]) == ["arm", "hand", "grip"]
    parts = [part.tolist() for part in document["state"].values()]
    assert parts == [[[[0.5]]], [[[-1.0]]], [[[2.0]]]]
    assert all(part.dtype == np.float32 for part in document["state"].values())


@pytest.mark.parametrize(("name", "steps"), [("video", {"video_steps": 2}),
                                             ("state", {"state_steps": 3})])  # fmt: skip
def test_a_policy_reading_several_time_steps_is_refused(name: str, steps: dict[str, int]) -> None:
    with pytest.raises(ContractError) as refused:
        gr00t.observation_document(Observation({"front": FRAME}), config(**steps), SPLIT)
    count = next(iter(steps.values()))
    assert str(refused.value) == (
        f"{name}.delta_indices: the server expects {count} time steps of {name}, the observation "
        "has one; vla-client sends the latest frame and state only"
    )


# -- the reply --------------------------------------------------------------------------------


def test_the_actions_are_joined_in_the_configs_order_with_each_keys_columns() -> None:
    arm = np.arange(6, dtype=np.float64).reshape(1, 2, 3)
    grip = np.array([[[10], [11]]], dtype=np.int32)
    hand = np.full((1, 2, 2), 0.5, dtype=np.float32)
    three = config(action_keys=("arm", "hand", "grip"))
    chunk, slices = gr00t.read_actions([{"grip": grip, "hand": hand, "arm": arm}, {}], three)
    assert chunk.dtype == np.float32 and chunk.shape == (2, 6)
    assert slices == {"arm": slice(0, 3), "hand": slice(3, 5), "grip": slice(5, 6)}
    assert chunk.tolist() == [[0, 1, 2, 0.5, 0.5, 10], [3, 4, 5, 0.5, 0.5, 11]]
    chunk[0, 0] = 99  # the client's own array
    assert arm[0, 0, 0] == 0
    assert gr00t.read_actions(({"arm": arm, "grip": grip}, None), config())[0].shape == (2, 4)


@pytest.mark.parametrize("answer", ["x", [{}], [{}, {}, {}], [[], {}], ({"arm": 1},), None])
def test_a_reply_that_is_not_actions_and_info_is_refused(answer: Any) -> None:
    with pytest.raises(ProtocolError) as refused:
        gr00t.read_actions(answer, config())
    assert str(refused.value) == "GR00T's get_action reply is not [actions, info]"


@pytest.mark.parametrize(
    "actions",
    [
        {"arm": np.zeros((1, 2, 1))},
        {"arm": np.zeros((1, 2, 1)), "grip": np.zeros((1, 2, 1)), "extra": np.zeros((1, 2, 1))},
        {"arm": np.zeros((1, 2, 1)), "wrist": np.zeros((1, 2, 1))},
    ],
)
def test_actions_under_other_keys_than_the_configs_are_refused(actions: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError) as refused:
        gr00t.read_actions([actions, {}], config())
    assert str(refused.value) == (
        f"GR00T's actions are {sorted(actions)}, its config announced ['arm', 'grip']"
    )


@pytest.mark.parametrize(
    ("grip", "got"),
    [
        ([[[0.0], [1.0]]], "list"),
        (None, "NoneType"),
        (np.zeros((2, 1)), "(2, 1)"),
        (np.zeros((2, 2, 1)), "(2, 2, 1)"),
        (np.zeros((1, 3, 1)), "(1, 3, 1)"),
        (np.array([[["a"], ["b"]]]), "(1, 2, 1)"),
        (np.zeros((1, 2, 1, 1)), "(1, 2, 1, 1)"),
    ],
)
def test_an_action_part_that_is_not_one_chunk_of_numbers_is_refused(grip: Any, got: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        gr00t.read_actions([{"arm": np.zeros((1, 2, 3)), "grip": grip}, {}], config())
    assert str(refused.value) == (
        f"GR00T's action 'grip' must be a (1, 2, D) number array, got {got}"
    )

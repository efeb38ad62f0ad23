"""vLLM-Omni's and RoboArena's messages without a server: what each config, answer and reset
reply is read as, and what is refused (the websocket tests in tests/client/ cover the rest)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vla_client.errors import ContractError, ProtocolError, ServerErrorFrame
from vla_client.observation import Observation
from vla_client.protocol.families import roboarena, vllm_omni
from vla_client.protocol.metadata_fields import MAX_METADATA_CAMERAS, MAX_METADATA_DIM


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"action_keys": []},
        {"action_keys": ["a", "a"]},
        {"action_keys": ["a", ""]},
        {"action_keys": "a"},
        {"action_horizon": 0},
        {"action_horizon": True},
        {"action_horizon": 2.0},
        {"image_resolution": [224]},
        {"image_resolution": [224, 0]},
        {"image_resolution": [224, True]},
        {"needs_session_id": 1},
    ],
)
def test_vllm_omni_refuses_a_config_field_in_another_form(document: Any) -> None:
    with pytest.raises(ProtocolError, match="vLLM-Omni"):
        vllm_omni.read_config(document)


def test_vllm_omni_names_what_it_got_instead_of_a_config() -> None:
    with pytest.raises(ProtocolError, match=r"^vLLM-Omni's config must be a map, got list$"):
        vllm_omni.read_config([])


def test_vllm_omni_reads_an_empty_config_as_announcing_nothing() -> None:
    config = vllm_omni.read_config({})
    assert (config.action_keys, config.action_horizon, config.image_size) == (None, None, None)
    assert config.needs_session_id is False
    metadata = vllm_omni.metadata(config)
    assert metadata.input.image_size is None
    assert metadata.output.action_horizon is None


CONFIG = vllm_omni.read_config({"action_keys": ["arm", "grip"], "action_horizon": 3})


@pytest.mark.parametrize(
    ("answer", "columns"),
    [
        ({"grip": np.ones((1, 3, 1)), "arm": np.zeros((1, 3, 2))}, {"arm": (0, 2), "grip": (2, 3)}),
        (
            {"grip": np.ones(3), "arm": np.zeros((3, 2), np.float64)},
            {"arm": (0, 2), "grip": (2, 3)},
        ),
    ],
)
def test_vllm_omni_joins_per_key_actions_in_the_announced_order(
    answer: dict[str, Any], columns: dict[str, tuple[int, int]]
) -> None:
    actions, keys = vllm_omni.read_actions(answer, CONFIG)
    assert actions.dtype == np.float32 and actions.shape == (3, 3)
    assert keys == {key: slice(*span) for key, span in columns.items()}
    assert actions[:, keys["grip"]].tolist() == [[1.0]] * 3


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        ({"arm": np.zeros((3, 2))}, "its config announced"),
        ({"arm": np.zeros((3, 2)), "grip": np.zeros((2, 1))}, r"must be \[3, D\]"),
        ({"arm": np.zeros((3, 2)), "grip": [[0.0]] * 3}, "not a number array"),
        ({"arm": np.zeros((3, 2)), "grip": np.array([["a"]] * 3)}, "not a number array"),
        ({"arm": np.zeros((3, 0)), "grip": np.zeros((3, 1))}, r"must be \[3, D\]"),
        (np.zeros((2, 3, 4)), r"must be \[3, D\]"),
    ],
)
def test_vllm_omni_refuses_actions_that_do_not_fit(answer: Any, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        vllm_omni.read_actions(answer, CONFIG)


def test_vllm_omni_refuses_per_key_actions_of_different_horizons_when_none_is_announced() -> None:
    config = vllm_omni.read_config({"action_keys": ["arm", "grip"]})
    with pytest.raises(ProtocolError, match="different horizons"):
        vllm_omni.read_actions({"arm": np.zeros((3, 2)), "grip": np.zeros((2, 1))}, config)


def test_vllm_omni_error_frames_and_reset_answers() -> None:
    with pytest.raises(ServerErrorFrame) as refused:
        vllm_omni.read_answer({"type": "error"})
    assert refused.value.code is None
    assert refused.value.detail == "the server sent an error frame without a message"
    assert vllm_omni.read_answer({"type": "result", "x": 1}) == {"type": "result", "x": 1}
    vllm_omni.read_reset({"status": "reset successful"})
    for answer in ({"status": "ok"}, "reset successful", None):
        with pytest.raises(ProtocolError, match="reset"):
            vllm_omni.read_reset(answer)


def test_vllm_omni_sends_no_state_key_without_a_state() -> None:
    frame = np.zeros((8, 8, 3), np.uint8)
    document = vllm_omni.request_document(Observation({"a": frame}), CONFIG, "s")
    assert document == {"images": [frame], "prompt": ""}


@pytest.mark.parametrize(
    "document",
    [
        None,
        {"image_resolution": [224, 224, 3]},
        {"image_resolution": [0, 224]},
        {"n_external_cameras": 3},
        {"n_external_cameras": True},
        {"needs_wrist_camera": "yes"},
        {"needs_session_id": None},
        {"needs_stereo_camera": True},
        {"action_space": "cartesian"},
    ],
)
def test_roboarena_refuses_a_config_it_cannot_serve(document: Any) -> None:
    with pytest.raises(ProtocolError, match="RoboArena"):
        roboarena.read_config(document)


def test_roboarena_says_why_it_cannot_serve_stereo_cameras() -> None:
    with pytest.raises(ProtocolError) as refused:
        roboarena.read_config({"needs_stereo_camera": True})
    assert str(refused.value) == (
        "RoboArena's server asks for stereo cameras; vla-client sends one frame per camera"
    )


def test_roboarena_fills_in_its_servers_defaults() -> None:
    config = roboarena.read_config({})
    assert config.cameras == ("exterior_image_1_left", "wrist_image_left")
    assert config.image_size == (224, 224)
    assert (config.needs_session_id, config.action_space) == (False, "joint_position")
    unsized = roboarena.read_config({"image_resolution": None, "n_external_cameras": 0})
    assert unsized.image_size is None and unsized.cameras == ("wrist_image_left",)
    assert roboarena.metadata(unsized).input.image_size is None


def test_roboarena_requests_name_each_camera_it_asks_for() -> None:
    config = roboarena.read_config({"n_external_cameras": 2, "needs_wrist_camera": False})
    frame = np.zeros((8, 8, 3), np.uint8)
    only_one = Observation({"exterior_image_1_left": frame}, state=np.zeros(8))
    with pytest.raises(ContractError, match="exterior_image_2_left"):
        roboarena.request_document(only_one, config, "s")
    both = {"exterior_image_1_left": frame, "exterior_image_2_left": frame}
    with pytest.raises(ContractError, match="none"):
        roboarena.request_document(Observation(both), config, "s")
    document = roboarena.request_document(Observation(both, state=np.ones(8)), config, "s")
    assert sorted(document) == [
        "endpoint", "observation/exterior_image_1_left", "observation/exterior_image_2_left",
        "observation/gripper_position", "observation/joint_position", "prompt",
    ]  # fmt: skip
    assert roboarena.reset_document(config, "s") == {"endpoint": "reset"}


@pytest.mark.parametrize(
    ("answer", "ok"),
    [
        (np.zeros((2, 8), np.float64), True),
        ({"actions": np.zeros((1, 8))}, True),
        (np.zeros((2, 7)), False),
        (np.zeros((0, 8)), False),
        (np.zeros(8), False),
        ({"action": np.zeros((2, 8))}, False),
        ("reset successful", False),
    ],
)
def test_roboarena_actions_are_an_n_by_8_chunk(answer: Any, ok: bool) -> None:
    if ok:
        actions, keys = roboarena.read_actions(answer, roboarena.read_config({}))
        assert actions.dtype == np.float32 and actions.shape[1] == 8 and keys is None
    else:
        with pytest.raises(ProtocolError, match=r"\(N, 8\)"):
            roboarena.read_actions(answer, roboarena.read_config({}))


def test_roboarena_takes_only_its_reset_text() -> None:
    roboarena.read_reset("reset successful")
    with pytest.raises(ProtocolError, match="reset"):
        roboarena.read_reset({"status": "reset successful"})


def test_vllm_omni_reads_every_field_it_announces() -> None:
    document = {
        "action_keys": ("arm", "grip"),
        "action_horizon": MAX_METADATA_DIM,
        "image_resolution": (1, MAX_METADATA_DIM),
        "needs_session_id": True,
        "embodiment_tag": "X",
    }
    config = vllm_omni.read_config(document)
    assert config == vllm_omni.OmniConfig(
        ("arm", "grip"), MAX_METADATA_DIM, (1, MAX_METADATA_DIM), True, document
    )
    assert vllm_omni.metadata(config).model_dump(include={"policy_family", "vllm_omni"}) == {
        "policy_family": "vllm_omni",
        "vllm_omni": document,
    }
    inputs = vllm_omni.metadata(config).input
    assert (inputs.image_size, inputs.image_size_required) == ([1, MAX_METADATA_DIM], True)
    assert vllm_omni.metadata(config).output.action_horizon == MAX_METADATA_DIM
    for name, over in (("action_horizon", MAX_METADATA_DIM + 1), ("image_resolution", [1, -1])):
        with pytest.raises(ProtocolError, match=name):
            vllm_omni.read_config({name: over})


def test_vllm_omni_requests_carry_frames_state_prompt_and_session() -> None:
    frames = {"b": np.zeros((8, 8, 3), np.uint8), "a": np.ones((8, 8, 3), np.uint8)}
    obs = Observation(frames, state=np.arange(3, dtype=np.float64), task="t")
    asks = vllm_omni.read_config({"needs_session_id": True})
    document = vllm_omni.request_document(obs, asks, "s1")
    assert list(document) == ["images", "state", "prompt", "session_id"]
    assert [frame.tolist() for frame in document["images"]] == [frames["b"].tolist(),
                                                                frames["a"].tolist()]  # fmt: skip
    assert document["state"].dtype == np.float32 and document["state"].tolist() == [0, 1, 2]
    assert (document["prompt"], document["session_id"]) == ("t", "s1")
    assert vllm_omni.reset_document(asks, "s1") == {"endpoint": "reset", "session_id": "s1"}
    assert vllm_omni.cameras(asks) is None


def test_vllm_omni_error_frames_carry_message_and_code() -> None:
    with pytest.raises(ServerErrorFrame) as refused:
        vllm_omni.read_answer({"type": "error", "message": "no policy", "code": "unsupported"})
    error = refused.value
    assert (error.status_code, error.detail, error.code) == (500, "no policy", "unsupported")
    assert str(error) == "server answered 500: no policy (unsupported)"
    with pytest.raises(ServerErrorFrame) as numbered:
        vllm_omni.read_answer({"type": "error", "message": "m", "code": 7})
    assert numbered.value.code == "7" and str(numbered.value) == "server answered 500: m (7)"
    chunk = np.zeros((2, 2))
    assert vllm_omni.read_answer(chunk) is chunk


def test_roboarena_reads_its_config_into_metadata() -> None:
    document = {
        "image_resolution": [1, MAX_METADATA_DIM],
        "n_external_cameras": 2,
        "needs_session_id": True,
        "action_space": "joint_velocity",
    }
    config = roboarena.read_config(document)
    assert (config.image_size, config.action_space) == ((1, MAX_METADATA_DIM), "joint_velocity")
    assert roboarena.cameras(config) == (*roboarena.EXTERIOR, roboarena.WRIST)
    dumped = roboarena.metadata(config).model_dump()
    assert dumped["policy_family"] == "roboarena" and dumped["roboarena"] == document
    assert {
        k: dumped["input"][k]
        for k in ("image_keys", "image_size", "image_size_required", "state_dim")
    } == {
        "image_keys": list(config.cameras),
        "image_size": [1, MAX_METADATA_DIM],
        "image_size_required": True,
        "state_dim": 8,
    }
    assert dumped["output"]["action_dim"] == 8
    with pytest.raises(ProtocolError, match=r"must be a map, got list"):
        roboarena.read_config([])
    with pytest.raises(ProtocolError, match="image_resolution"):
        roboarena.read_config({"image_resolution": [1, MAX_METADATA_DIM + 1]})


def test_roboarena_requests_are_its_evaluators_observation() -> None:
    config = roboarena.read_config({"n_external_cameras": 0, "needs_session_id": True})
    frame = np.zeros((8, 8, 3), np.uint8)
    state = np.arange(8, dtype=np.float64)
    document = roboarena.request_document(
        Observation({"wrist_image_left": frame}, state=state, task="t"), config, "s2"
    )
    assert list(document) == [
        "observation/wrist_image_left", "observation/joint_position",
        "observation/gripper_position", "prompt", "session_id", "endpoint",
    ]  # fmt: skip
    assert document["observation/joint_position"].tolist() == list(range(7))
    assert document["observation/joint_position"].dtype == np.float64  # as the robot read it
    assert document["observation/gripper_position"].tolist() == [7]
    assert (document["prompt"], document["session_id"], document["endpoint"]) == (
        "t",
        "s2",
        "infer",
    )
    assert roboarena.reset_document(config, "s2") == {"endpoint": "reset", "session_id": "s2"}
    with pytest.raises(ContractError) as refused:
        roboarena.request_document(Observation({"wrist_image_left": frame}, state=state[:7]),
                                   config, "s")  # fmt: skip
    assert (refused.value.field, refused.value.given) == ("state", "7 values")
    assert refused.value.expected == "8 values (7 joint positions, then the gripper)"
    with pytest.raises(ContractError) as stateless:
        roboarena.request_document(Observation({"wrist_image_left": frame}), config, "s")
    assert (stateless.value.field, stateless.value.given) == ("state", "none")
    with pytest.raises(ContractError) as missing:
        roboarena.request_document(Observation({"x": frame}, state=state), config, "s")
    assert (missing.value.field, missing.value.given) == ("cameras", ["x"])


def test_roboarena_names_what_it_got_instead_of_a_chunk() -> None:
    config = roboarena.read_config({})
    with pytest.raises(ProtocolError, match=r"got \(2, 7\)"):
        roboarena.read_actions(np.zeros((2, 7)), config)
    with pytest.raises(ProtocolError, match="got str"):
        roboarena.read_actions("text", config)
    with pytest.raises(ProtocolError, match=r"\(N, 8\)"):
        roboarena.read_actions(np.array([["a"] * 8]), config)


def test_vllm_omni_slices_each_of_many_keys_and_takes_one_to_the_bound() -> None:
    keys = [f"k{i}" for i in range(MAX_METADATA_CAMERAS)]
    config = vllm_omni.read_config({"action_keys": keys})
    answer = {key: np.full((2, 2), i, np.float32) for i, key in enumerate(keys)}
    actions, slices = vllm_omni.read_actions(answer, config)
    assert slices == {key: slice(2 * i, 2 * i + 2) for i, key in enumerate(keys)}
    assert actions[:, slices[keys[-1]]].tolist() == [[len(keys) - 1] * 2] * 2
    assert vllm_omni.read_config({"action_keys": ["one"]}).action_keys == ("one",)
    with pytest.raises(ProtocolError, match="action_keys"):
        vllm_omni.read_config({"action_keys": [*keys, "over"]})
    with pytest.raises(ProtocolError, match=r"per-key actions \['k0'\] but its config announced"):
        vllm_omni.read_actions({"k0": np.zeros((2, 2))}, vllm_omni.read_config({}))
    with pytest.raises(ProtocolError, match=r"different horizons: \[3, 2\]"):
        vllm_omni.read_actions(
            {"k0": np.zeros((3, 2)), "k1": np.zeros((2, 2))},
            vllm_omni.read_config({"action_keys": ["k0", "k1"]}),
        )
    with pytest.raises(ProtocolError, match=r"actions must be \[H, D\]"):
        vllm_omni.read_actions(np.zeros((1, 2, 3, 4)), vllm_omni.read_config({}))
    with pytest.raises(ProtocolError, match=r"action 'k0' is not a number array: list"):
        vllm_omni.read_actions({"k0": [1.0]}, vllm_omni.read_config({"action_keys": ["k0"]}))


def test_each_dialects_actions_are_a_writable_copy_of_the_read_only_reply() -> None:
    reply = np.arange(24, dtype=np.float32).reshape(3, 8)
    reply.flags.writeable = False  # as msgpack's arrays arrive: views of the received message
    omni, _ = vllm_omni.read_actions(reply[:, :2], vllm_omni.read_config({"action_horizon": 3}))
    arena, _ = roboarena.read_actions(reply, roboarena.read_config({}))
    for actions, source in ((omni, reply[:, :2]), (arena, reply)):
        assert actions.flags.writeable and not np.shares_memory(actions, reply)
        np.testing.assert_array_equal(actions, source)

import numpy as np
import pytest

from vla_client.errors import ProtocolError
from vla_client.protocol import ActionEnvelope, build_envelope, build_raw, read_actions


def test_envelope_matches_the_contract():
    actions = np.arange(6, dtype=np.float32).reshape(3, 2)
    envelope = build_envelope(
        actions, request_id="r", model="m", numpy_values=False, denoise_steps=4
    )
    parsed = ActionEnvelope.model_validate(envelope)
    assert parsed.object == "action.generation" and parsed.id == "r"
    assert parsed.data[0].action.shape == [3, 2] and parsed.data[0].action.dtype == "float32"
    assert (
        parsed.usage is not None
        and parsed.usage.action_horizon == 3
        and parsed.usage.denoise_steps == 4
    )
    got, request_id = read_actions(envelope)
    assert request_id == "r" and got.dtype == np.float32
    np.testing.assert_array_equal(got, actions)


def test_batched_envelope_has_one_entry_per_element():
    envelope = build_envelope(np.zeros((2, 3, 4)), request_id="r", model="m", numpy_values=True)
    assert [d["index"] for d in envelope["data"]] == [0, 1]
    assert read_actions(envelope)[0].shape == (2, 3, 4)


def test_raw_and_openpi_replies_are_read():
    raw = build_raw(np.ones((2, 2)), request_id="x", numpy_values=False)
    assert read_actions(raw)[0].shape == (2, 2)
    assert (
        read_actions({"actions": np.ones((5, 8), np.float64), "server_timing": {}})[0].dtype
        == np.float32
    )


@pytest.mark.parametrize("bad", [np.zeros((3,)), np.zeros((0, 2)), np.zeros((1, 2, 3, 4))])
def test_envelope_refuses_bad_shapes(bad):
    with pytest.raises(ValueError, match="action output"):
        build_envelope(bad, request_id="r", model="m", numpy_values=False)


@pytest.mark.parametrize(
    "reply",
    [
        [],
        {"data": []},
        {"data": [{"x": 1}]},
        {"nothing": 1},
        {"actions": "abc"},
        {"actions": [1, 2]},
    ],
)
def test_unreadable_replies_are_protocol_errors(reply):
    with pytest.raises(ProtocolError):
        read_actions(reply)

import numpy as np
import pytest

from vla_client.errors import ProtocolError
from vla_client.protocol import build_envelope, build_raw, read_actions


def test_envelope_has_sglangs_fields():
    actions = np.arange(6, dtype=np.float32).reshape(3, 2)
    envelope = build_envelope(
        actions, request_id="r", model="m", numpy_values=False, denoise_steps=4
    )
    assert envelope["object"] == "action.generation" and envelope["id"] == "r"
    assert isinstance(envelope["created"], int) and envelope["model"] == "m"
    (datum,) = envelope["data"]
    assert (datum["index"], datum["input_index"], datum["candidate_index"]) == (0, 0, 0)
    assert datum["action"] == {
        "type": "continuous",
        "dtype": "float32",
        "shape": [3, 2],
        "values": [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]],
    }
    assert envelope["usage"] == {
        "batch_size": 1,
        "action_horizon": 3,
        "action_dim": 2,
        "denoise_steps": 4,
        "prefix_cache_hit": False,
    }
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

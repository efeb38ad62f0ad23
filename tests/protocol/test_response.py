import json
import re
import time
import warnings

import msgpack
import numpy as np
import pytest

from vla_client.errors import ProtocolError, ServerError
from vla_client.protocol import Reply, new_request_id, read_actions, read_reply
from vla_client.server.wire.reply_build import build_envelope, build_raw

JSON = "application/json"


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


# read_reply: every reply a transport receives goes through it.


def _error(reply: Reply, **kwargs) -> ServerError:
    with pytest.raises(ServerError) as caught:
        read_reply(reply, **kwargs)
    return caught.value


def test_an_error_status_raises_with_the_json_detail_and_retry_after():
    reply = Reply(503, JSON, b'{"detail": "warming up"}', {"retry-after": "2.5"})
    error = _error(reply, request_id="act_1")
    assert (error.status_code, error.detail, error.retry_after) == (503, "warming up", 2.5)
    assert error.request_id == "act_1" and error.retryable


def test_status_400_is_the_first_error_300_to_399_redirects_and_299_a_document():
    error = _error(Reply(400, JSON, b'{"detail": "bad"}'))
    assert (error.status_code, error.detail) == (400, "bad")
    for status in (300, 399):
        redirect = _error(Reply(status, JSON, b"", {"location": "http://x/"}), request_id="act_r")
        assert redirect.status_code == status and redirect.request_id == "act_r"
        assert f"redirected to http://x/ (HTTP {status}); not followed" in redirect.detail
    assert read_reply(Reply(299, JSON, b'{"actions": [[1.0]]}')) == {"actions": [[1.0]]}


def test_an_error_without_retry_after_has_none():
    error = _error(Reply(500, JSON, b'{"detail": "boom"}'))
    assert error.retry_after is None and not error.retryable and error.request_id is None


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"error": "warming up"}', "warming up"),  # SGLang's action server
        (b'{"error": {"message": "warming up", "code": 503}}', "warming up"),  # OpenAI's form
        (b'{"error": {"code": 503}}', '{"code":503}'),  # no message: the object as JSON text
        (b'{"detail": "first", "error": "second"}', "first"),
        (b'{"detail": null, "error": "second"}', "second"),
        (b'{"other": 1}', '{"other": 1}'),  # neither: the body as text
        (b"[1]", "[1]"),
        (b"", "HTTP 503"),
    ],
)
def test_an_error_body_gives_its_detail_or_its_error_message(body: bytes, detail: str):
    assert _error(Reply(503, JSON, body)).detail == detail


def test_a_structured_detail_comes_back_as_its_json_text():
    detail = [{"loc": ["body", "input"], "msg": "field required"}]
    body = json.dumps({"detail": detail}).encode()
    assert json.loads(_error(Reply(422, JSON, body)).detail) == detail


@pytest.mark.parametrize(
    "body, detail",
    [
        (b"  upstream timed out \n", "upstream timed out"),  # not JSON: the text, stripped
        (b'{"message": "nope"}', '{"message": "nope"}'),  # JSON without detail: the text
        (b'["a", "b"]', '["a", "b"]'),  # JSON but not an object
        (b"caf\xe9", "caf\ufffd"),  # not UTF-8: replaced, never an exception
    ],
)
def test_an_error_body_without_a_detail_is_shown_as_text(body, detail):
    assert _error(Reply(502, "text/plain", body)).detail == detail


@pytest.mark.parametrize("body", [b"", b"  \n"])
def test_an_empty_error_body_names_the_status(body):
    assert _error(Reply(504, "text/plain", body)).detail == "HTTP 504"


def test_a_json_success_body_is_parsed():
    body = json.dumps({"request_id": "x", "actions": [[0.25, 0.5]]}).encode()
    assert read_reply(Reply(200, "application/json; charset=utf-8", body)) == {
        "request_id": "x",
        "actions": [[0.25, 0.5]],
    }


def test_a_reply_without_content_type_is_msgpack():
    """A websocket's binary frame becomes a reply with no content type: msgpack."""
    body = msgpack.packb({"request_id": "w", "actions": [[1.5]]})
    assert read_reply(Reply(200, "", body)) == {"request_id": "w", "actions": [[1.5]]}
    assert read_reply(Reply(200, "application/msgpack", body))["request_id"] == "w"


@pytest.mark.parametrize(
    "content_type, body",
    [(JSON, b"{not json"), ("", b"\xc1"), ("text/html", b"<html></html>")],
)
def test_an_unreadable_success_body_is_a_protocol_error(content_type, body):
    with pytest.raises(ProtocolError, match=r"^cannot read the server's reply: ") as caught:
        read_reply(Reply(200, content_type, body), request_id="act_2")
    assert caught.value.request_id == "act_2"


def test_a_websocket_error_map_raises_its_status_detail_and_retry_after():
    body = msgpack.packb({"error": "queue full", "status": 503, "retry_after": 1})
    error = _error(Reply(200, "", body), request_id="act_3")
    assert (error.status_code, error.detail, error.retry_after) == (503, "queue full", 1.0)
    assert error.request_id == "act_3"


@pytest.mark.parametrize(
    "status, expected",
    [(400, 400), (599, 599), (399, 500), (600, 500), (None, 500), ("503", 500), (True, 500)],
)
def test_an_error_map_status_outside_4xx_5xx_is_a_500(status, expected):
    document = {"error": 7} if status is None else {"error": 7, "status": status}
    error = _error(Reply(200, "", msgpack.packb(document)))
    assert error.status_code == expected and error.detail == "7" and error.retry_after is None


@pytest.mark.parametrize("key", ["actions", "data"])
def test_a_reply_with_actions_and_an_error_field_is_a_document(key):
    document = {"error": "warning only", key: [[1.0]]}
    assert read_reply(Reply(200, "", msgpack.packb(document))) == document


def test_new_request_ids_are_act_and_32_hex_digits_and_differ():
    ids = {new_request_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"act_[0-9a-f]{32}", i) for i in ids)


# Building replies: the values a server sends.


def test_envelope_values_are_float32_in_both_forms():
    ints = np.array([[1, 2], [3, 4]], dtype=np.int64)
    listed = build_envelope(ints, request_id="r", model="m", numpy_values=False)
    values = listed["data"][0]["action"]["values"]
    assert values == [[1.0, 2.0], [3.0, 4.0]]
    assert all(type(v) is float for row in values for v in row)
    as_numpy = build_envelope(ints.astype(np.float64), request_id="r", model="m", numpy_values=True)
    array = as_numpy["data"][0]["action"]["values"]
    assert isinstance(array, np.ndarray) and array.dtype == np.float32
    np.testing.assert_array_equal(array, ints)


def test_envelope_created_is_the_current_unix_second():
    before = int(time.time())
    created = build_envelope(np.ones((1, 1)), request_id="r", model="m", numpy_values=False)[
        "created"
    ]
    assert before <= created <= int(time.time()) and type(created) is int


def test_envelope_timings_only_when_given_and_extra_fields_merged():
    plain = build_envelope(np.ones((1, 2)), request_id="r", model="m", numpy_values=False)
    assert "timings" not in plain and plain["usage"]["denoise_steps"] is None
    timed = build_envelope(
        np.ones((1, 2)),
        request_id="r",
        model="m",
        numpy_values=False,
        timings={"infer_ms": 1.5},
        extra={"digests": {"wrist": "abc"}},
    )
    assert timed["timings"] == {"infer_ms": 1.5} and timed["digests"] == {"wrist": "abc"}


def test_batched_envelope_entries_carry_each_elements_chunk():
    batch = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    envelope = build_envelope(batch, request_id="r", model="m", numpy_values=False)
    assert [(d["index"], d["input_index"], d["candidate_index"]) for d in envelope["data"]] == [
        (0, 0, 0),
        (1, 1, 0),
        (2, 2, 0),
    ]
    assert [d["action"]["values"] for d in envelope["data"]] == batch.tolist()
    assert envelope["usage"]["batch_size"] == 3
    assert (envelope["usage"]["action_horizon"], envelope["usage"]["action_dim"]) == (2, 2)


def test_raw_reply_has_exactly_its_fields():
    raw = build_raw(np.array([[1, 2]], dtype=np.int64), request_id="x", numpy_values=False)
    assert raw == {"request_id": "x", "actions": [[1.0, 2.0]], "parameters": {}}
    assert all(type(v) is float for v in raw["actions"][0])
    full = build_raw(
        np.ones((2, 3)),
        request_id="y",
        numpy_values=True,
        parameters={"seed": 3},
        timings={"infer_ms": 2.0},
        extra={"digests": {}},
    )
    assert set(full) == {"request_id", "actions", "parameters", "timings", "digests"}
    assert full["parameters"] == {"seed": 3} and full["timings"] == {"infer_ms": 2.0}
    assert isinstance(full["actions"], np.ndarray) and full["actions"].dtype == np.float32
    assert read_actions(full)[1] == "y"


@pytest.mark.parametrize("bad", [np.zeros((3,)), np.zeros((2, 0)), np.zeros((1, 1, 1, 1))])
def test_raw_reply_refuses_bad_shapes(bad):
    with pytest.raises(ValueError, match="action output"):
        build_raw(bad, request_id="r", numpy_values=False)


# Reading actions back.


def test_a_batched_envelope_is_read_as_one_stacked_array():
    envelope = {"id": 17, "data": [{"action": {"values": [[1, 2]]}},
                                   {"action": {"values": [[3, 4]]}}]}  # fmt: skip
    actions, request_id = read_actions(envelope)
    assert request_id == "17" and actions.dtype == np.float32
    np.testing.assert_array_equal(actions, [[[1, 2]], [[3, 4]]])


def test_a_reply_without_an_id_has_none():
    assert read_actions({"actions": [[1.0]]})[1] is None
    assert read_actions({"data": [{"action": {"values": [[1.0]]}}]})[1] is None
    assert read_actions({"request_id": 5, "actions": [[1.0]]})[1] == "5"


@pytest.mark.parametrize(
    "reply, message",
    [
        ([1], "^reply must be an object, got list$"),
        ({"data": {}}, "^envelope has no data entries$"),
        ({"data": [{"action": None}]}, "^envelope entry lacks action values: "),
        ({"data": [{"action": {}}]}, "^envelope entry lacks action values: 'values'$"),
        ({"b": 1, "a": 2}, r"^reply has neither 'data' nor 'actions' \(keys: \['a', 'b'\]\)$"),
        ({"actions": [["x"]]}, "^actions must be numbers, got str 'x'$"),
        ({"actions": [1.0, 2.0]}, r"^actions must be \[H, D\] or \[B, H, D\], got shape \(2,\)$"),
        ({"actions": np.zeros((1, 1, 1, 1))}, r"got shape \(1, 1, 1, 1\)$"),
        ({"actions": [[1.0], [1.0, 2.0]]}, "^actions are not a numeric array: setting an array"),
        ({"actions": [[10**400]]}, "^actions are not a numeric array: int too large to convert"),
    ],
)
def test_unreadable_replies_say_what_is_wrong(reply, message):
    with pytest.raises(ProtocolError, match=message):
        read_actions(reply)


@pytest.mark.parametrize(
    "values, message",
    [
        ([["1e3", 1.0]], "got str '1e3'"),
        ([[1.0, True]], "got bool True"),
        ([[None, 1.0]], "got NoneType None"),
        ([["nan", "-inf"]], "got str 'nan'"),
        ([[1e40, 1.0]], "beyond float32's range"),
        (np.array([[True, False]]), "got dtype bool"),
        (np.array([["1.5"]]), "got dtype <U3"),
        (np.array([[1.0]], dtype=object), "got dtype object"),
        ([np.array([True])], "got dtype bool"),
        ("1.0", "must be a list or an array, got str"),
    ],
)
def test_actions_must_be_numbers(values, message):
    # numpy would turn every one of these into floats (or an object array) without a word
    for reply in ({"actions": values}, {"data": [{"action": {"values": values}}]}):
        with pytest.raises(ProtocolError, match=re.escape(message)):
            read_actions(reply)


def test_integer_and_float_actions_are_numbers():
    actions, _ = read_actions({"actions": [[1, 2.5], [np.float32(3), float("nan")]]})
    assert actions.dtype == np.float32 and actions.shape == (2, 2)
    assert read_actions({"actions": np.arange(4, dtype=np.int16).reshape(2, 2)})[0].dtype == (
        np.float32
    )


def test_an_int_too_wide_for_numpy_is_still_a_number():
    # numpy would keep ints past 64 bits as objects; they are numbers, read as their float32
    actions, _ = read_actions({"actions": [[2**70, 1]]})
    assert actions.dtype == np.float32 and actions.tolist() == [[2.0**70, 1.0]]


@pytest.mark.parametrize("values", [[[1e40, 1.0]], np.array([[1.0, -1e40]])])
def test_a_value_beyond_float32_is_refused_without_a_numpy_warning(values):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns of an overflow in the cast unless told not to
        with pytest.raises(ProtocolError, match=r"^actions hold values beyond float32's range$"):
            read_actions({"actions": values})


def test_an_infinity_sent_as_such_is_read_not_taken_for_an_overflow():
    # float32 holds infinities: only a finite value that becomes one is refused here (what a
    # robot makes of an infinite action is for the safety gate to judge)
    for values in ([[float("inf"), 1.0]], np.array([[-np.inf, 1e30]])):
        actions, _ = read_actions({"actions": values})
        assert np.isinf(actions[0, 0]) and actions[0, 1] == np.float32(values[0][1])


def test_envelope_entries_of_different_shapes_are_a_protocol_error():
    envelope = {
        "data": [
            {"action": {"values": [[1.0, 2.0]]}},
            {"action": {"values": [[1.0, 2.0, 3.0]]}},
        ]
    }
    with pytest.raises(ProtocolError, match=r"differ in shape: \[\(1, 2\), \(1, 3\)\]"):
        read_actions(envelope)


def test_float32_actions_from_msgpack_come_back_as_a_float32_copy_the_caller_may_change():
    sent = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
    frozen = np.frombuffer(sent.tobytes(), np.float32).reshape(4, 3)  # read-only, as unpacked
    actions, _ = read_actions({"actions": frozen})
    assert actions.dtype == np.float32 and actions.flags.writeable
    assert not np.shares_memory(actions, frozen)
    np.testing.assert_array_equal(actions, sent)

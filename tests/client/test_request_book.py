"""`RequestBook`, the clients' sans-IO core, driven directly: the options it resolves, the fit
it builds from the options or a server's metadata, the request it prepares (ids, runtime block,
digests, frames apart over ``ipc://``), its deadlines, and the result it reads from a reply.

The book reads the time through its module's `time`; the `clock` fixture swaps that for one the
test sets (`monotonic`) and one that steps a quarter second per reading (`perf_counter`), so
every duration it measures is known exactly. Times are exact in binary. A few tests at the end
go through a real reference server for what needs the wire.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from vla_client import ActionClient, Observation
from vla_client.client import request_book
from vla_client.client.options import ClientOptions
from vla_client.client.request_book import (
    PreparedRequest,
    Received,
    RequestBook,
    check_age,
    refuse_runtime,
    runtime_block,
)
from vla_client.codecs import frame_digest
from vla_client.errors import (
    CodecError,
    ContractError,
    DeadlineExceededError,
    MismatchedReplyError,
    ProtocolError,
    RequestTimeoutError,
    ServerError,
    StaleObservationError,
)
from vla_client.protocol import Reply, encode_request, read_metadata
from vla_client.protocol.ipc import SharedFrames
from vla_client.protocol.layouts import DROID
from vla_client.protocol.wire import loads
from vla_client.transports.drive import Offload

NOW = 100.0
STEP_S = 0.25
"""What each `perf_counter` reading adds: every measured stage took 250 ms."""


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The request book's clocks: `monotonic` frozen at `now` until the test moves it,
    `perf_counter` a quarter second later at each reading."""
    fake = SimpleNamespace(now=NOW, perf=1.0)

    def perf_counter() -> float:
        fake.perf += STEP_S
        return fake.perf

    monkeypatch.setattr(
        request_book, "time", SimpleNamespace(monotonic=lambda: fake.now, perf_counter=perf_counter)
    )
    return fake


def frame(height: int = 48, width: int = 64, value: int = 0) -> np.ndarray:
    pixels = np.full((height, width, 3), value, np.uint8)
    pixels[0, 0] = (1, 2, 3)
    return pixels


def observation(**cameras: np.ndarray) -> Observation:
    return Observation(cameras or {"front": frame()}, state=[0.5, -0.5], task="pick")


def metadata(**input_spec: Any) -> Any:
    return read_metadata({"object": "action.metadata", "input": input_spec})


def received(document: dict[str, Any], content: bytes = b"12345") -> Received:
    return Received(Reply(200, "application/json", content), document, 0.5)


def prepared(
    deadline_at: float | None = None, *, body: bytes = b"{}", frames: SharedFrames | None = None
) -> PreparedRequest:
    return PreparedRequest(body, "application/json", "application/json", "r-1", 0.0, 0.0,
                           deadline_at, frames=frames)  # fmt: skip


# --- the module's helpers


def test_the_runtime_block_is_the_runtime_with_the_digest_shortcut_merged_in() -> None:
    runtime = {"return_timing": False}
    assert runtime_block(None, False) is None
    assert runtime_block({}, False) is None
    copied = runtime_block(runtime, False)
    assert copied == runtime and copied is not runtime
    assert runtime_block(None, True) == {"return_digest": True}
    assert runtime_block(runtime, True) == {"return_timing": False, "return_digest": True}


def test_a_runtime_block_is_refused_where_a_server_has_no_place_for_one() -> None:
    refuse_runtime(None)
    refuse_runtime({})
    with pytest.raises(ValueError) as caught:
        refuse_runtime({"return_digest": True})
    assert str(caught.value) == "this server takes no runtime options or digests"


def test_the_age_is_not_checked_without_a_limit_or_a_capture_time(clock: SimpleNamespace) -> None:
    check_age(observation(), 0.5)  # no capture time: no age
    old = Observation({"front": frame()}, capture_times={"front": NOW - 60.0})
    check_age(old, None)  # no limit
    with pytest.raises(StaleObservationError):
        check_age(old, 0.5)


# --- what the book is built with


def test_the_book_resolves_its_transport_defaults() -> None:
    plain = RequestBook(ClientOptions()).options
    assert (plain.encoding, plain.wire) == ("png", "json")
    websocket = RequestBook(ClientOptions(), websocket=True).options
    assert (websocket.encoding, websocket.wire) == ("png", "msgpack")
    own = RequestBook(ClientOptions(), own_msgpack="GR00T").options
    assert (own.encoding, own.wire) == ("raw", "msgpack")
    with pytest.raises(ValueError, match="GR00T takes raw arrays"):
        RequestBook(ClientOptions(encoding="png"), own_msgpack="GR00T")
    ipc = RequestBook(ClientOptions(), ipc=True).options
    assert (ipc.encoding, ipc.wire) == ("raw", "msgpack")
    with pytest.raises(ValueError, match="ipc://"):
        RequestBook(ClientOptions(encoding="png"), ipc=True)


def test_without_metadata_the_fit_is_the_options_own() -> None:
    fitter = RequestBook(
        ClientOptions(image_size=(32, 40), resize="crop", camera_map={"cam": "front"})
    ).fitter(None)
    assert (fitter.size, fitter.fit) == ((32, 40), "crop")
    assert fitter.camera_map == {"cam": "front"}
    assert RequestBook(ClientOptions(image_size=(32, 40))).fitter(None).fit == "pad"  # auto
    unsized = RequestBook(ClientOptions()).fitter(None)
    assert (unsized.size, unsized.fit) == (None, "pad")
    assert RequestBook(ClientOptions(resize="none")).fitter(None).fit == "none"


@pytest.mark.parametrize("resize", ["pad", "crop"])
def test_an_explicit_resize_falls_back_to_the_openpi_layout_size(resize: str) -> None:
    book = RequestBook(ClientOptions(resize=resize, layout=DROID), websocket=True, openpi=True)
    assert book.fitter(None).size == (224, 224)
    assert book.fitter(metadata(image_keys=["front"])).size == (224, 224)
    assert book.fitter(metadata(image_size=[96, 128])).size == (96, 128)  # the server's first


@pytest.mark.parametrize("resize", ["auto", "none"])
def test_no_explicit_resize_takes_no_size_from_the_layout(resize: str) -> None:
    book = RequestBook(ClientOptions(resize=resize, layout=DROID), websocket=True, openpi=True)
    assert book.fitter(None).size is None
    assert book.fitter(metadata(image_keys=["front"])).size is None


@pytest.mark.parametrize("resize", ["pad", "crop"])
def test_an_explicit_resize_with_no_size_known_is_refused(resize: str) -> None:
    book = RequestBook(ClientOptions(resize=resize))
    for where in (None, metadata(image_keys=["front"])):
        with pytest.raises(ContractError) as caught:
            book.fitter(where)
        error = caught.value
        assert (error.field, error.expected, error.given) == (
            "input.image_size", "an image size to resize to", f"none known (resize={resize!r})"
        )  # fmt: skip
        assert error.hint == (
            "the server announces none and neither image_size nor the openpi layout gives one; "
            "pass image_size=(height, width), or resize='none' to send frames as they are"
        )
    sized = RequestBook(ClientOptions(resize=resize, image_size=(32, 32)))
    assert sized.fitter(None).size == (32, 32)
    assert sized.fitter(metadata()).size == (32, 32)


# --- the fit to a server's metadata


def test_the_fit_follows_the_servers_metadata_and_is_built_once_per_document() -> None:
    book = RequestBook(ClientOptions(camera_map={"cam": "front"}))
    announced = metadata(image_keys=["front"], image_size=[96, 128], image_size_required=True)
    fitter = book.fitter(announced)
    assert (fitter.size, fitter.fit) == ((96, 128), "pad")
    assert fitter.camera_map == {"cam": "front"}
    assert fitter.server_keys == ("front",)
    assert book.fitter(announced) is fitter
    other = metadata(image_keys=["front"], image_size=[64, 64], image_size_required=True)
    assert book.fitter(other).size == (64, 64)
    assert book.fitter(other) is book.fitter(other)
    assert book.fitter(announced) is not fitter  # a new document: built again
    fitted = book.fitted(Observation({"cam": frame()}), book.fitter(announced))[0]
    assert list(fitted.images) == ["front"] and fitted.images["front"].shape == (96, 128, 3)


@pytest.mark.parametrize(
    ("resize", "image_size", "spec", "fit", "size"),
    [
        # auto pads when the server requires its size or the options give one, else sends as is
        ("auto", None, {"image_size": [96, 128], "image_size_required": True}, "pad", (96, 128)),
        ("auto", None, {"image_size": [96, 128]}, "none", (96, 128)),
        ("auto", (40, 40), {}, "pad", (40, 40)),
        ("auto", (40, 40), {"image_size": [96, 128]}, "pad", (40, 40)),
        ("auto", None, {}, "none", None),
        ("none", None, {"image_size": [96, 128], "image_size_required": True}, "none", (96, 128)),
        ("none", (40, 40), {}, "none", (40, 40)),
        ("crop", None, {"image_size": [96, 128]}, "crop", (96, 128)),
        ("pad", (40, 40), {"image_size": [96, 128]}, "pad", (40, 40)),
    ],
)
def test_the_fit_resizes_as_the_options_and_the_server_say(
    resize: str, image_size: Any, spec: dict[str, Any], fit: str, size: Any
) -> None:
    book = RequestBook(ClientOptions(resize=resize, image_size=image_size))
    fitter = book.fitter(metadata(**spec))
    assert (fitter.fit, fitter.size) == (fit, size)


def test_the_fit_renames_resizes_and_refuses_what_the_server_did_not_announce() -> None:
    book = RequestBook(ClientOptions(camera_map={"left": "front"}, resize="crop"))
    fitter = book.fitter(metadata(image_keys=["front", "wrist"], image_size=[32, 32]))
    fitted, _ = book.fitted(observation(left=frame(48, 64), wrist=frame(20, 20)), fitter)
    assert {name: f.shape for name, f in fitted.images.items()} == {
        "front": (32, 32, 3), "wrist": (32, 32, 3)
    }  # fmt: skip
    with pytest.raises(ContractError, match=r"input\.image_keys"):
        book.fitted(observation(left=frame()), fitter)  # the wrist camera is missing
    with pytest.raises(ContractError, match=r"input\.image_keys"):
        book.fitted(observation(top=frame(), wrist=frame()), fitter)  # a camera it has not


# --- the observation refused before it is fitted


def test_only_an_observation_is_fitted() -> None:
    book = RequestBook(ClientOptions())
    with pytest.raises(TypeError) as caught:
        book.fitted({"front": frame()}, book.fitter(None))  # type: ignore[arg-type]
    assert str(caught.value) == "infer() takes an Observation, got dict"


def test_each_stale_observation_is_counted_and_not_sent(clock: SimpleNamespace) -> None:
    book = RequestBook(ClientOptions(max_observation_age_s=0.5))
    old = Observation({"front": frame()}, capture_times={"front": NOW - 0.75})
    for count in (1, 2):
        with pytest.raises(StaleObservationError):
            book.prepare(old, {}, None, None, fitter=book.fitter(None), deadline_at=None)
        assert book.stats.stale_observations == count
    assert book.stats.sent == 0
    fresh = Observation({"front": frame()}, capture_times={"front": NOW - 0.25})
    book.prepare(fresh, {}, None, None, fitter=book.fitter(None), deadline_at=None)
    assert book.stats.sent == 1


# --- the request it prepares


def test_the_request_is_the_encoded_fitted_observation(clock: SimpleNamespace) -> None:
    options = ClientOptions(encoding="jpeg", jpeg_quality=20, image_size=(32, 32), resize="crop")
    book = RequestBook(options)
    runtime = {"return_timing": False}
    request = book.prepare(
        observation(), {"seed": 3}, runtime, "r-7", fitter=book.fitter(None), deadline_at=NOW + 1
    )
    fitted = book.fitter(None)(observation())
    body, content_type = encode_request(
        fitted, encoding="jpeg", wire="json", request_id="r-7", parameters={"seed": 3},
        runtime=runtime, jpeg_quality=20,
    )  # fmt: skip
    assert request.body == body
    assert request.content_type == request.accept == content_type
    assert (request.request_id, request.deadline_at) == ("r-7", NOW + 1)
    assert (request.fit_ms, request.encode_ms) == (250.0, 250.0)
    assert request.sent_digests is None and request.frames is None
    assert book.stats.sent == 1
    book.prepare(observation(), {}, None, None, fitter=book.fitter(None), deadline_at=None)
    assert book.stats.sent == 2


def test_a_request_without_an_id_gets_a_fresh_one_it_carries() -> None:
    book = RequestBook(ClientOptions())
    ids = set()
    for _ in range(2):
        request = book.prepare(observation(), {}, None, None, fitter=book.fitter(None),
                               deadline_at=None)  # fmt: skip
        assert request.request_id.startswith("act_")
        assert loads(request.body, "json")["request_id"] == request.request_id
        ids.add(request.request_id)
    assert len(ids) == 2


def test_an_openpi_request_carries_the_layouts_keys_only() -> None:
    book = RequestBook(ClientOptions(layout=DROID), websocket=True, openpi=True)
    cameras = {"exterior_image_1_left": frame(), "wrist_image_left": frame()}
    obs = Observation(cameras, state=np.zeros(8, np.float32), task="pick")
    request = book.prepare(obs, {}, None, "r-9", fitter=book.fitter(None), deadline_at=None)
    body, _ = encode_request(obs, encoding="raw", wire="msgpack", request_id=None, openpi=DROID)
    assert request.body == body and request.request_id == "r-9"
    assert b"r-9" not in request.body


@pytest.mark.parametrize("ipc", [False, True])
def test_return_digest_records_the_digest_of_each_frame_as_sent(ipc: bool) -> None:
    book = RequestBook(ClientOptions(image_size=(32, 32), camera_map={"cam": "front"}), ipc=ipc)
    depth = np.arange(48 * 64, dtype=np.uint16).reshape(48, 64)
    obs = Observation({"cam": frame(value=9)}, depth={"range": depth})
    fitted = book.fitter(None)(obs)
    for runtime in (None, {}, {"return_digest": False}, {"return_digest": 1}):
        request = book.prepare(obs, {}, runtime, "r-1", fitter=book.fitter(None), deadline_at=None)
        assert request.sent_digests is None, runtime
    request = book.prepare(obs, {}, {"return_digest": True}, "r-1", fitter=book.fitter(None),
                           deadline_at=None)  # fmt: skip
    assert request.sent_digests == {
        "front": frame_digest(fitted.images["front"]), "range": frame_digest(fitted.depth["range"])
    }  # fmt: skip
    assert request.sent_digests["front"]["shape"] == [32, 32, 3]


def test_over_ipc_the_fitted_frames_travel_apart_from_the_body(clock: SimpleNamespace) -> None:
    book = RequestBook(ClientOptions(image_size=(32, 32)), ipc=True)
    depth = np.full((48, 64), 7, np.uint16)
    obs = Observation({"front": frame(value=5)}, state=[0.25], task="t", depth={"range": depth})
    fitted = book.fitter(None)(obs)
    runtime = {"return_timing": False}
    request = book.prepare(obs, {"seed": 4}, runtime, "r-5", fitter=book.fitter(None),
                           deadline_at=NOW + 2)  # fmt: skip
    assert isinstance(request.frames, SharedFrames)
    assert list(request.frames.images) == ["front"] and list(request.frames.depth) == ["range"]
    assert np.array_equal(request.frames.images["front"], fitted.images["front"])
    assert np.array_equal(request.frames.depth["range"], fitted.depth["range"])
    assert request.frames.depth["range"].shape == (32, 32)
    document = loads(request.body, "msgpack")
    assert document["request_id"] == "r-5" and request.request_id == "r-5"
    assert document["parameters"] == {"seed": 4}
    assert document["runtime"]["return_timing"] is False
    assert document["input"]["observation"]["images"] == {}
    assert "depth" not in document["input"]["observation"]
    assert (request.deadline_at, request.fit_ms, request.encode_ms) == (NOW + 2, 250.0, 250.0)
    assert request.sent_digests is None
    assert book.stats.sent == 1
    fresh = book.prepare(obs, {}, None, None, fitter=book.fitter(None), deadline_at=None)
    assert loads(fresh.body, "msgpack")["request_id"] == fresh.request_id
    assert fresh.request_id.startswith("act_")
    sent = RequestBook.result(
        request, np.zeros((1, 2), np.float32), round_trip_ms=1.0, decode_ms=1.0,
        bytes_received=3, raw={},
    ).timings.bytes_sent  # fmt: skip
    assert sent == len(request.body) + request.frames.nbytes


def test_a_message_gets_no_digests_unless_asked(clock: SimpleNamespace) -> None:
    book = RequestBook(ClientOptions())
    request = book.prepare_message(
        observation(), book.fitter(None), lambda o: (b"abc", "application/x"), "r-2", NOW + 1
    )
    assert (request.body, request.content_type, request.accept) == (
        b"abc", "application/x", "application/x"
    )  # fmt: skip
    assert (request.sent_digests, request.frames, request.deadline_at) == (None, None, NOW + 1)
    assert (request.request_id, request.fit_ms, request.encode_ms) == ("r-2", 250.0, 250.0)
    unnamed = book.prepare_message(observation(), book.fitter(None), lambda o: (b"", "x"), None,
                                   None)  # fmt: skip
    assert unnamed.request_id.startswith("act_") and unnamed.deadline_at is None
    assert book.stats.sent == 2


# --- deadlines


def test_the_wait_before_sending_is_the_time_left(clock: SimpleNamespace) -> None:
    book = RequestBook(ClientOptions(deadline_s=2.0))
    assert book.wait_until(None) is None
    assert book.wait_until(NOW + 0.5) == 0.5
    assert book.wait_until(NOW + 2.0) == 2.0
    for count, deadline_at in ((1, NOW), (2, NOW - 0.5)):
        with pytest.raises(DeadlineExceededError) as caught:
            book.wait_until(deadline_at)
        assert str(caught.value) == "the request's deadline passed before it was sent"
        assert book.stats.late_replies == count


def test_a_deadline_is_the_options_time_from_now(clock: SimpleNamespace) -> None:
    assert RequestBook(ClientOptions()).deadline_at() is None
    assert RequestBook(ClientOptions(deadline_s=1.5)).deadline_at() == NOW + 1.5


def test_the_budget_and_a_late_reply_are_counted_each_time(clock: SimpleNamespace) -> None:
    book = RequestBook(ClientOptions(deadline_s=0.5))
    assert book.budget(prepared(None)) is None
    assert book.budget(prepared(NOW + 0.5)) == 0.5
    clock.now = NOW + 1.0
    for count in (1, 2):
        with pytest.raises(DeadlineExceededError) as caught:
            book.budget(prepared(NOW + 0.5))
        assert caught.value.request_id == "r-1"
        assert str(caught.value) == "request r-1 is past its deadline"
        assert book.stats.late_replies == count
    for count in (3, 4):
        with pytest.raises(DeadlineExceededError) as caught:
            book.check_in_time(prepared(NOW + 0.5))
        assert caught.value.request_id == "r-1"
        assert str(caught.value) == "reply to r-1 came after its deadline of 0.5 s; discarded"
        assert book.stats.late_replies == count
    book.check_in_time(prepared(None))
    assert book.stats.late_replies == 4


# --- reading the reply


def test_a_reply_is_read_with_its_timings_ids_and_digests(clock: SimpleNamespace) -> None:
    book = RequestBook(ClientOptions())
    document = {
        "request_id": "r-1",
        "actions": [[0.5, -0.5]],
        "timings": {"inference_ms": 2, "note": "x"},
        "server_timing": {"total_ms": 3.5},
        "digests": {"front": {"sha256": "ab"}},
    }
    request = prepared(body=b"12345678")
    result = book.result_for(request, received(document), 7.0)
    assert result is not None
    assert result.actions.tolist() == [[0.5, -0.5]] and result.request_id == "r-1"
    assert result.raw is document and result.digests == {"front": {"sha256": "ab"}}
    timings = result.timings
    assert (timings.round_trip_ms, timings.decode_ms) == (7.0, 0.5 + 250.0)
    assert (timings.bytes_sent, timings.bytes_received) == (8, 5)
    assert timings.server == {"inference_ms": 2.0, "total_ms": 3.5}
    assert (timings.fit_ms, timings.encode_ms) == (0.0, 0.0)
    bare = book.result_for(request, received({"request_id": "r-1", "actions": [[1.0]]}), 1.0)
    assert bare is not None and bare.timings.server == {} and bare.digests is None


def test_the_result_carries_what_was_sent_and_received() -> None:
    digests = {"front": {"sha256": "cd"}}
    request = PreparedRequest(b"abc", "x", "x", "r-3", 1.5, 2.5, None, sent_digests=digests)
    actions = np.zeros((2, 3), np.float32)
    keys = {"arm": slice(0, 3)}
    result = RequestBook.result(
        request, actions, round_trip_ms=4.0, decode_ms=5.0, bytes_received=6, raw={"a": 1},
        server={"total_ms": 1.0}, digests={"d": {}}, action_keys=keys,
    )  # fmt: skip
    assert result.actions is actions and result.request_id == "r-3"
    assert (result.raw, result.digests, result.action_keys) == ({"a": 1}, {"d": {}}, keys)
    assert result.sent_digests == digests
    t = result.timings
    assert (t.fit_ms, t.encode_ms, t.round_trip_ms, t.decode_ms) == (1.5, 2.5, 4.0, 5.0)
    assert (t.bytes_sent, t.bytes_received, t.server) == (3, 6, {"total_ms": 1.0})
    plain = RequestBook.result(request, actions, round_trip_ms=0, decode_ms=0, bytes_received=0,
                               raw={})  # fmt: skip
    assert plain.timings.server == {} and plain.digests is None and plain.action_keys is None


def test_a_reply_for_another_request_is_refused_and_counted() -> None:
    book = RequestBook(ClientOptions())
    other = received({"request_id": "r-2", "actions": [[1.0]]})
    for count in (1, 2):
        with pytest.raises(MismatchedReplyError) as caught:
            book.result_for(prepared(), other, 1.0)
        assert caught.value.request_id == "r-1"
        assert str(caught.value) == "reply is for request 'r-2', not the one sent ('r-1')"
        assert book.stats.mismatched_replies == count
    assert book.result_for(prepared(), other, 1.0, can_skip=True) is None
    assert book.stats.mismatched_replies == 3


def test_a_reply_without_an_id_is_refused_unless_the_endpoint_has_none() -> None:
    book = RequestBook(ClientOptions())
    with pytest.raises(ProtocolError) as caught:
        book.result_for(prepared(), received({"actions": [[1.0]]}), 1.0)
    assert type(caught.value) is ProtocolError and caught.value.request_id == "r-1"
    assert str(caught.value) == (
        "reply carries no request id; request r-1 sent one, and a reply that cannot say which "
        "request it answers is not used"
    )
    assert book.stats.mismatched_replies == 0
    openpi = RequestBook(ClientOptions(), websocket=True, openpi=True)
    result = openpi.result_for(prepared(), received({"actions": [[1.0]]}), 1.0)
    assert result is not None and result.actions.tolist() == [[1.0]]


def test_a_reply_is_parsed_for_its_request(clock: SimpleNamespace) -> None:
    book = RequestBook(ClientOptions())
    ok = book.read(prepared(), Reply(200, "application/json", b'{"actions": [[1]]}'))
    assert ok.document == {"actions": [[1]]} and ok.read_ms == 250.0
    with pytest.raises(ServerError) as caught:
        book.read(prepared(), Reply(500, "application/json", b'{"detail": "boom"}'))
    assert caught.value.request_id == "r-1" and caught.value.status_code == 500


def test_retries_and_dropped_connections_are_counted() -> None:
    book = RequestBook(ClientOptions())
    book.retried(ValueError("first"))
    book.retried(ValueError("second"))
    book.dropped("timeout")
    book.dropped("timeout")
    book.dropped("unasked")
    assert book.stats.retries == 2
    assert book.stats.dropped_connections == {"timeout": 2, "unasked": 1}


# --- a server family's own messages


def run_round(book: RequestBook, obs: Observation, spec: Any, **kwargs: Any) -> Any:
    """`message_round` driven by hand: the encode and the exchange record what they got."""
    seen: dict[str, Any] = {}

    def encode(fitted: Observation) -> tuple[bytes, str]:
        seen["fitted"] = fitted
        return b"message", "application/msgpack"

    def exchange(body: bytes, timeout_s: float | None) -> Any:
        seen["sent"], seen["timeout_s"] = body, timeout_s
        return {"answer": 1}, 11
        yield  # a generator of no steps

    def read(answer: Any) -> Any:
        seen["answer"] = answer
        return np.ones((2, 2), np.float32), {"arm": slice(0, 2)}, {"raw": True}

    steps = book.message_round(obs, spec, kwargs.get("request_id"), kwargs.get("deadline_at"),
                               encode, exchange, read)  # fmt: skip
    step = next(steps)
    assert isinstance(step, Offload)
    try:
        steps.send(step())
    except StopIteration as done:
        return done.value, seen
    raise AssertionError("the round took more steps than its exchange")


def test_a_message_round_fits_sends_and_reads_within_the_deadline(clock: SimpleNamespace) -> None:
    book = RequestBook(ClientOptions(deadline_s=0.5), own_msgpack="GR00T")
    spec = metadata(image_keys=["front"], image_size=[32, 32], image_size_required=True)
    result, seen = run_round(book, observation(), spec, request_id="r-4", deadline_at=NOW + 0.5)
    assert seen["fitted"].images["front"].shape == (32, 32, 3)
    assert (seen["sent"], seen["timeout_s"], seen["answer"]) == (b"message", 0.5, {"answer": 1})
    assert result.request_id == "r-4" and result.actions.tolist() == [[1, 1], [1, 1]]
    assert (result.raw, result.action_keys) == ({"raw": True}, {"arm": slice(0, 2)})
    timings = result.timings
    # perf_counter: fit 250, encode 250, round trip 250, decode 250 (each its own readings)
    assert (timings.round_trip_ms, timings.decode_ms) == (250.0, 250.0)
    assert (timings.bytes_received, timings.bytes_sent, timings.server) == (11, 7, {})
    assert book.stats.sent == 1


def test_a_message_round_without_the_contract_sends_frames_as_they_are() -> None:
    book = RequestBook(ClientOptions(check_contract=False), own_msgpack="GR00T")
    spec = metadata(image_keys=["front"], image_size=[32, 32], image_size_required=True)
    result, seen = run_round(book, observation(top=frame()), spec)
    assert list(seen["fitted"].images) == ["top"]
    assert seen["fitted"].images["top"].shape == (48, 64, 3)
    assert seen["timeout_s"] is None and result.request_id.startswith("act_")


def test_a_message_round_refuses_depth_frames() -> None:
    book = RequestBook(ClientOptions(), own_msgpack="GR00T")
    depth = {"range": np.zeros((4, 4), np.uint16), "tof": np.zeros((4, 4), np.float32)}
    obs = Observation({"front": frame()}, depth=depth)
    with pytest.raises(CodecError) as caught:
        run_round(book, obs, metadata())
    assert str(caught.value) == (
        "this server family's messages carry no depth frames (range, tof); depth travels on the "
        "action API (HTTP, the /v1/actions/realtime websocket or ipc://)"
    )
    assert book.stats.sent == 0


def message(fitted: Observation) -> tuple[bytes, str]:
    return b"m", "x"


def one_action(answer: Any) -> Any:
    return np.ones((1, 1), np.float32), None, {}


def test_a_message_round_answered_after_the_deadline_is_discarded(clock: SimpleNamespace) -> None:
    book = RequestBook(ClientOptions(deadline_s=0.5), own_msgpack="GR00T")

    def late(body: bytes, timeout_s: float | None) -> Any:
        clock.now = NOW + 0.75
        return {}, 1
        yield

    steps = book.message_round(
        observation(), metadata(), "r-4", NOW + 0.5, message, late, one_action
    )
    step = next(steps)
    with pytest.raises(DeadlineExceededError) as caught:
        steps.send(step())
    assert str(caught.value) == "reply to r-4 came after its deadline of 0.5 s; discarded"
    assert book.stats.late_replies == 1


def test_a_message_round_that_times_out_at_its_deadline_says_so(clock: SimpleNamespace) -> None:
    book = RequestBook(ClientOptions(deadline_s=0.5), own_msgpack="GR00T")

    def silent(body: bytes, timeout_s: float | None) -> Any:
        clock.now = NOW + 0.5
        raise RequestTimeoutError("no answer")
        yield

    steps = book.message_round(
        observation(), metadata(), "r-4", NOW + 0.5, message, silent, one_action
    )
    step = next(steps)
    with pytest.raises(DeadlineExceededError) as caught:
        steps.send(step())
    assert str(caught.value) == "no reply to r-4 within its deadline of 0.5 s"
    assert caught.value.request_id == "r-4" and book.stats.late_replies == 1


def test_a_message_round_takes_only_an_observation() -> None:
    book = RequestBook(ClientOptions(), own_msgpack="GR00T")
    with pytest.raises(TypeError, match="takes an Observation, got dict"):
        run_round(book, {"front": frame()}, metadata())  # type: ignore[arg-type]


def test_a_real_server_answers_in_time_as_the_runtime_block_asks(
    server_url: str, frames: dict[str, np.ndarray]
) -> None:
    obs = Observation(frames, state=np.zeros(7), task="t")
    with ActionClient(server_url, image_size=(64, 64), deadline_s=30.0) as client:
        quiet = client.infer(obs, runtime={"return_timing": False})
        timed = client.infer(obs)
        assert client.stats.sent == 2 and client.stats.late_replies == 0
    assert quiet.timings.server == {} and quiet.digests is None
    assert timed.timings.server and timed.request_id != quiet.request_id


# --- through a real server


def test_a_real_reply_carries_the_request_id_timings_and_digests(
    server_url: str, frames: dict[str, np.ndarray]
) -> None:
    obs = Observation(frames, state=np.zeros(7), task="t")
    with ActionClient(server_url, image_size=(64, 64), resize="crop") as client:
        result = client.infer(obs, request_id="r-x", return_digest=True)
    assert result.request_id == "r-x" and result.actions.shape == (10, 7)
    assert result.timings.bytes_sent > 0 and result.timings.bytes_received > 0
    server = result.timings.server
    assert server and all(isinstance(v, float) for v in server.values())
    assert result.sent_digests is not None and result.digests is not None
    for name, sent in result.sent_digests.items():
        assert sent["shape"] == [64, 64, 3]
        assert result.digests[name]["sha256"] == sent["sha256"]

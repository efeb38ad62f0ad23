"""`ActionApiSession`, the action API's calls as steps, driven directly against a transport
that answers what each test scripts: the metadata read (retried, counted, kept over HTTP and
read again after a failed connection or a 4xx, once per document on a websocket), the time
left before the deadline handed to every wait, the request's exchange (its frames apart over
``ipc://``, retries counted within the deadline), a websocket's replies read past one to
another request, and openpi's connection discarded after a reply that cannot be read.

The session and the request book read the time through their modules' `time`; the `clock`
fixture swaps it for one the test sets (`monotonic`) and one that steps a quarter second per
reading (`perf_counter`), and the steps are run by `run`, which waits a `Sleep` by moving that
clock. A test at the end goes through a real reference server for what needs the wire.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from vla_client import ActionClient, AsyncActionClient, Observation
from vla_client.client import action_api, request_book
from vla_client.client.action_api import ActionApiSession
from vla_client.client.options import ClientOptions
from vla_client.client.request_book import RequestBook
from vla_client.errors import (
    ConnectError,
    ContractError,
    DeadlineExceededError,
    ProtocolError,
    RequestTimeoutError,
    ServerError,
)
from vla_client.protocol import Reply, read_metadata
from vla_client.protocol.ipc import SharedFrames
from vla_client.transports import retry as retry_module
from vla_client.transports.drive import Offload, Sleep, Steps
from vla_client.transports.retry import Backoff, RetryPolicy

NOW = 100.0
DOCUMENT = {"object": "action.metadata"}
RETRY = RetryPolicy(max_attempts=3, max_total_s=60.0, backoff=Backoff(initial_s=0.5))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """`monotonic` at `now` until the test (or a `Sleep`) moves it; `perf_counter` a quarter
    second later at each reading."""
    fake = SimpleNamespace(now=NOW, perf=1.0)

    def perf_counter() -> float:
        fake.perf += 0.25
        return float(fake.perf)

    faked = SimpleNamespace(monotonic=lambda: fake.now, perf_counter=perf_counter)
    for module in (action_api, request_book, retry_module):
        monkeypatch.setattr(module, "time", faked)
    return fake


class Scripted:
    """A transport that answers from scripts: each call takes the next item of its list (the
    last one answers every call after it), and raises it when it is an exception. Every call is
    recorded with its keywords."""

    def __init__(
        self,
        *,
        documents: list[Any] | None = None,
        replies: list[Any] | None = None,
        received: list[Any] | None = None,
        on_call: Callable[[str], None] | None = None,
    ) -> None:
        self.documents = list(documents or [DOCUMENT])
        self.replies = list(replies or [])
        self.received = list(received or [])
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.on_call = on_call
        self.on_drop: Any = "unset"
        self.replies_without_ids: Any = "unset"

    def _next(self, name: str, script: list[Any], keywords: dict[str, Any]) -> Any:
        self.calls.append((name, keywords))
        if self.on_call is not None:
            self.on_call(name)
        item = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(item, BaseException):
            raise item
        return item

    def metadata(self, **keywords: Any) -> Any:
        return self._next("metadata", self.documents, keywords)

    def exchange(self, body: bytes, content_type: str, accept: str, **keywords: Any) -> Reply:
        return self._next("exchange", self.replies, {"body": body, **keywords})  # type: ignore[no-any-return]

    def receive(self, **keywords: Any) -> Reply:
        return self._next("receive", self.received, keywords)  # type: ignore[no-any-return]

    def reset(self) -> None:
        self.calls.append(("reset", {}))

    def discard(self, reason: str) -> None:
        self.calls.append(("discard", {"reason": reason}))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [keywords for called, keywords in self.calls if called == name]


def run(steps: Steps[Any], clock: SimpleNamespace) -> Any:
    """Run `steps` as `drive` does, a `Sleep` waited by moving the clock."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value
        value, error = None, None
        try:
            if isinstance(step, Sleep):
                clock.now += step.seconds
            elif isinstance(step, Offload):
                value = step.work()
            else:
                value = step()
        except BaseException as exc:
            error = exc


def reply(request_id: str | None = "r-1", status: int = 200) -> Reply:
    document: dict[str, Any] = {"actions": [[0.5, -0.5]]}
    if request_id is not None:
        document["request_id"] = request_id
    if status >= 400:
        document = {"detail": "refused"}
    return Reply(status, "application/json", json.dumps(document).encode())


def observation() -> Observation:
    return Observation({"front": np.zeros((8, 8, 3), np.uint8)}, state=[0.5], task="pick")


def session(
    transport: Scripted,
    *,
    stream: bool = False,
    retry: RetryPolicy = RETRY,
    **options: Any,
) -> tuple[ActionApiSession, RequestBook]:
    openpi = options.get("layout") is not None
    ipc = options.pop("ipc", False)
    book = RequestBook(ClientOptions(resize="none", **options), websocket=stream, openpi=openpi,
                       ipc=ipc)  # fmt: skip
    return ActionApiSession(book, transport, retry, stream=stream), book


def infer(the_session: ActionApiSession, clock: SimpleNamespace, **keywords: Any) -> Any:
    keywords.setdefault("request_id", "r-1")
    return run(the_session.infer(observation(), keywords.pop("parameters", {}), **keywords), clock)


# --- how the session sets up its transport


def test_only_openpis_websocket_is_told_its_replies_carry_no_ids() -> None:
    openpi = Scripted()
    ActionApiSession(RequestBook(ClientOptions(layout="flat"), websocket=True, openpi=True),
                     openpi, RETRY, stream=True)  # fmt: skip
    assert openpi.replies_without_ids is True
    realtime = Scripted()
    book = RequestBook(ClientOptions(), websocket=True)
    ActionApiSession(book, realtime, RETRY, stream=True)
    assert realtime.replies_without_ids is False
    realtime.on_drop("reason")
    assert book.stats.dropped_connections == {"reason": 1}
    http = Scripted()
    ActionApiSession(RequestBook(ClientOptions()), http, RETRY, stream=False)
    assert http.replies_without_ids == "unset" and http.on_drop == "unset"


# --- the metadata


def test_the_metadata_is_read_and_retried_per_the_policy_with_each_retry_counted(
    clock: SimpleNamespace,
) -> None:
    transport = Scripted(documents=[ConnectError("refused", sent=False), DOCUMENT])
    the_session, book = session(transport)
    assert run(the_session.metadata(), clock) == read_metadata(DOCUMENT)
    assert len(transport.named("metadata")) == 2 and book.stats.retries == 1
    assert clock.now == NOW + 0.5  # the backoff's first wait


def test_without_the_contract_check_no_metadata_is_read(clock: SimpleNamespace) -> None:
    transport = Scripted(replies=[reply()])
    the_session, _ = session(transport, check_contract=False)
    assert run(the_session.contract(None), clock) is None
    assert infer(the_session, clock).request_id == "r-1"
    assert transport.named("metadata") == []


def test_the_contract_is_read_with_the_time_left_before_the_deadline(
    clock: SimpleNamespace,
) -> None:
    transport = Scripted(replies=[reply()])
    the_session, _ = session(transport, deadline_s=2.0)
    result = infer(the_session, clock, parameters={"horizon": 4}, runtime={"return_timing": False})
    assert transport.named("metadata") == [{"timeout_s": 2.0}]
    (sent,) = transport.named("exchange")
    assert sent["timeout_s"] == 2.0 and "frames" not in sent
    body = json.loads(sent["body"])
    assert body["request_id"] == "r-1" and body["parameters"] == {"horizon": 4}
    assert body["runtime"] == {"return_timing": False}
    assert result.request_id == "r-1" and result.actions.tolist() == [[0.5, -0.5]]


def test_without_a_deadline_the_waits_are_the_transports_own(clock: SimpleNamespace) -> None:
    transport = Scripted(replies=[reply()])
    the_session, _ = session(transport)
    infer(the_session, clock)
    assert transport.named("metadata") == [{"timeout_s": None}]
    assert transport.named("exchange")[0]["timeout_s"] is None


def test_a_contract_read_that_times_out_at_the_deadline_is_a_deadline_error(
    clock: SimpleNamespace,
) -> None:
    def late(name: str) -> None:
        clock.now += 2.0

    transport = Scripted(documents=[RequestTimeoutError("read timed out")], on_call=late)
    the_session, book = session(transport, deadline_s=1.0)
    with pytest.raises(DeadlineExceededError) as caught:
        infer(the_session, clock)
    assert str(caught.value) == "no metadata from the server within its deadline of 1 s"
    assert book.stats.late_replies == 1


def test_contract_retries_are_counted_and_end_at_the_deadline(clock: SimpleNamespace) -> None:
    transport = Scripted(documents=[ConnectError("refused", sent=False), DOCUMENT],
                         replies=[reply()])  # fmt: skip
    the_session, book = session(transport, deadline_s=10.0)
    infer(the_session, clock)
    assert book.stats.retries == 1 and len(transport.named("metadata")) == 2
    # a wait longer than the time left before the deadline is not begun
    slow = RetryPolicy(max_attempts=3, max_total_s=60.0, backoff=Backoff(initial_s=3.0, max_s=5.0))
    refused = Scripted(documents=[ConnectError("refused", sent=False), DOCUMENT])
    the_session, book = session(refused, retry=slow, deadline_s=2.0)
    with pytest.raises(ConnectError):
        run(the_session.contract(NOW + 2.0), clock)
    assert len(refused.named("metadata")) == 1 and book.stats.retries == 0


def test_http_keeps_the_metadata_until_a_connection_fails_or_a_4xx(clock: SimpleNamespace) -> None:
    once = RetryPolicy(max_attempts=1)
    replies = [reply(), reply(), ConnectError("dropped"), reply(), reply(status=500), reply()]
    transport = Scripted(replies=[*replies, reply(status=400), reply()])
    the_session, _ = session(transport, retry=once)
    infer(the_session, clock)
    infer(the_session, clock)
    assert len(transport.named("metadata")) == 1  # kept
    with pytest.raises(ConnectError):
        infer(the_session, clock)
    infer(the_session, clock)
    assert len(transport.named("metadata")) == 2  # read again after the failed connection
    with pytest.raises(ServerError) as caught:
        infer(the_session, clock)
    assert caught.value.status_code == 500
    infer(the_session, clock)
    assert len(transport.named("metadata")) == 2  # a 5xx says nothing of who the server is
    with pytest.raises(ServerError):
        infer(the_session, clock)
    infer(the_session, clock)
    assert len(transport.named("metadata")) == 3  # read again after a 4xx, 400 the first
    assert transport.named("reset") == []  # HTTP has no connection of its own to end


def test_a_server_without_metadata_gives_empty_metadata(clock: SimpleNamespace) -> None:
    transport = Scripted(documents=[ServerError(404, "not found")])
    the_session, _ = session(transport)
    assert run(the_session.contract(None), clock) == read_metadata({})
    assert len(transport.named("metadata")) == 1
    with pytest.raises(ServerError):
        run(session(Scripted(documents=[ServerError(401, "no")]))[0].contract(None), clock)


def test_a_websocket_reads_one_metadata_document_once(clock: SimpleNamespace) -> None:
    transport = Scripted(documents=[DOCUMENT])
    the_session, _ = session(transport, stream=True)
    first = run(the_session.contract(None), clock)
    second = run(the_session.contract(None), clock)
    assert first is second and len(transport.named("metadata")) == 2
    transport.documents = [{"object": "action.metadata"}]  # a new connection's document
    assert run(the_session.contract(None), clock) is not first


def test_a_contract_that_changed_is_checked_before_anything_is_sent(
    clock: SimpleNamespace,
) -> None:
    """A new connection's metadata (websocket), or the metadata read again after a 4xx (HTTP),
    that asks for a camera the observation lacks refuses the request before it is sent."""
    wrist = {"object": "action.metadata", "input": {"image_keys": ["wrist"]}}
    websocket = Scripted(documents=[DOCUMENT], replies=[reply()])
    the_session, _ = session(websocket, stream=True)
    infer(the_session, clock)
    websocket.documents = [wrist]  # reconnected to a server that announces another camera
    with pytest.raises(ContractError, match=r"input\.image_keys"):
        infer(the_session, clock)
    assert len(websocket.named("exchange")) == 1
    http = Scripted(documents=[DOCUMENT, wrist], replies=[reply(status=404), reply()])
    the_session, _ = session(http, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ServerError):
        infer(the_session, clock)
    with pytest.raises(ContractError, match=r"input\.image_keys"):
        infer(the_session, clock)
    assert len(http.named("exchange")) == 1 and len(http.named("metadata")) == 2


# --- the exchange


def test_request_retries_are_counted_and_end_at_the_deadline(clock: SimpleNamespace) -> None:
    transport = Scripted(replies=[ConnectError("refused", sent=False), reply()])
    the_session, book = session(transport, deadline_s=10.0)
    infer(the_session, clock)
    assert book.stats.retries == 1 and len(transport.named("exchange")) == 2
    slow = RetryPolicy(max_attempts=3, max_total_s=60.0, backoff=Backoff(initial_s=3.0, max_s=5.0))
    refused = Scripted(replies=[ConnectError("refused", sent=False), reply()])
    the_session, book = session(refused, retry=slow, deadline_s=2.0)
    with pytest.raises(ConnectError):
        infer(the_session, clock)
    assert len(refused.named("exchange")) == 1 and book.stats.retries == 0


def test_over_ipc_the_frames_travel_apart(clock: SimpleNamespace) -> None:
    transport = Scripted(replies=[reply()])
    the_session, _ = session(transport, ipc=True)
    infer(the_session, clock)
    (sent,) = transport.named("exchange")
    assert isinstance(sent["frames"], SharedFrames) and list(sent["frames"].images) == ["front"]


def test_the_round_trip_is_timed_from_the_send_to_the_reply(clock: SimpleNamespace) -> None:
    transport = Scripted(replies=[reply()])
    the_session, _ = session(transport)
    result = infer(the_session, clock)
    # perf_counter readings: the session's start, the book's read (2), the session's end
    assert result.timings.round_trip_ms == 750.0


def test_a_websocket_reads_past_a_reply_to_another_request(clock: SimpleNamespace) -> None:
    transport = Scripted(replies=[reply("r-0")], received=[reply("r-1")])
    the_session, book = session(transport, stream=True, deadline_s=4.0)
    result = infer(the_session, clock)
    assert result.request_id == "r-1" and book.stats.mismatched_replies == 1
    assert transport.named("receive") == [{"timeout_s": 4.0}]


def test_a_websocket_error_ends_its_connection(clock: SimpleNamespace) -> None:
    transport = Scripted(replies=[reply(status=500)])
    the_session, _ = session(transport, stream=True, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ServerError):
        infer(the_session, clock)
    assert len(transport.named("reset")) == 1


@pytest.mark.parametrize("content", [b"\xc1", b"\x80"], ids=["body", "chunk"])
def test_openpis_connection_is_discarded_after_an_unreadable_reply(
    clock: SimpleNamespace, content: bytes
) -> None:
    unreadable = Reply(200, "application/msgpack", content)
    openpi = Scripted(replies=[unreadable])
    the_session, _ = session(openpi, stream=True, layout="flat")
    with pytest.raises(ProtocolError):
        infer(the_session, clock, request_id=None)
    assert openpi.named("discard") == [{"reason": "unreadable reply"}]
    for stream in (True, False):  # replies with ids: the connection carries on
        realtime = Scripted(replies=[unreadable])
        the_session, _ = session(realtime, stream=stream)
        with pytest.raises(ProtocolError):
            infer(the_session, clock)
        assert realtime.named("discard") == []
    # an HTTP client of openpi's layout is not on openpi's websocket: nothing to discard
    http = Scripted(replies=[unreadable])
    the_session, _ = session(http, layout="flat", wire="msgpack")
    with pytest.raises(ProtocolError):
        infer(the_session, clock, request_id=None)
    assert http.named("discard") == []


# --- a real server


def test_the_clients_against_the_reference_server(server_url: str) -> None:
    """Blocking over HTTP, asyncio over the realtime websocket, and a client a factory makes
    with options of its own: each gets the reply to its request."""
    with ActionClient(server_url, image_size=(64, 64), deadline_s=30.0) as client:
        result = client.infer(observation(), request_id="r-9")
    assert result.request_id == "r-9" and result.actions.shape == (10, 7)
    websocket_url = "ws" + server_url.removeprefix("http")

    async def main() -> Any:
        async with AsyncActionClient(websocket_url, image_size=(64, 64)) as client:
            return [await client.infer(observation(), request_id=f"r-{n}") for n in (10, 11)]

    assert [result.request_id for result in asyncio.run(main())] == ["r-10", "r-11"]
    factory = functools.partial(ActionClient, server_url, resize="crop", image_size=(32, 32))
    with factory(check_contract=False, encoding="jpeg") as client:
        result = client.infer(observation(), request_id="r-12")
        assert client.options.encoding == "jpeg" and client.stats.retries == 0
    assert result.request_id == "r-12" and result.actions.shape == (10, 7)

"""The client's time limits exactly at, just under and just over, on a clock the test sets.

`max_observation_age_s`: an observation exactly that old is sent, a hair older is refused
unsent. `deadline_s`: a reply that arrives exactly at the deadline is used, one a hair later is
discarded; once no time is left before the deadline, nothing more is waited for. The client
reads the time through its request book module's `time`; the test swaps that for a fixed clock (only
there: servers and other threads keep the real one). Times are exact in binary, and "a hair"
is `EPS`, the spacing of floats around 100 s.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from vla_client import ActionClient, Observation
from vla_client.client import request_book
from vla_client.client.options import ClientOptions
from vla_client.client.request_book import PreparedRequest, Received, RequestBook
from vla_client.errors import DeadlineExceededError, RequestTimeoutError, StaleObservationError
from vla_client.protocol import Reply

NOW = 100.0
EPS = 2.0**-46
EDGES = ["just-under", "at", "just-over"]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The request book's clock, frozen at `now` until the test moves it."""
    fake = SimpleNamespace(now=NOW)
    real = request_book.time
    clock = SimpleNamespace(monotonic=lambda: fake.now, perf_counter=real.perf_counter)
    monkeypatch.setattr(request_book, "time", clock)
    return fake


@pytest.mark.parametrize(
    ("age", "sent"), [(0.5 - EPS, True), (0.5, True), (0.5 + EPS, False)], ids=EDGES
)
def test_an_observation_exactly_max_age_old_is_sent(
    clock: SimpleNamespace, server_url: str, frames: dict, age: float, sent: bool
) -> None:
    assert NOW - (NOW - age) == age
    observation = Observation(
        {"cam": frames["left"]}, capture_times={"cam": NOW - age}, task="fresh enough"
    )
    with ActionClient(server_url, max_observation_age_s=0.5, check_contract=False) as client:
        if sent:
            assert client.infer(observation).actions.shape == (10, 7)
        else:
            with pytest.raises(StaleObservationError):
                client.infer(observation)
        assert client.stats.sent == int(sent)
        assert client.stats.stale_observations == int(not sent)


def prepared(deadline_at: float | None) -> PreparedRequest:
    return PreparedRequest(b"{}", "application/json", "application/json", "r-1", 0.0, 0.0,
                           deadline_at)  # fmt: skip


def received() -> Received:
    document = {"request_id": "r-1", "actions": [[0.5, -0.5]]}
    return Received(Reply(200, "application/json", b""), document, 0.0)


@pytest.mark.parametrize(
    ("arrival", "used"),
    [(NOW + 0.25 - EPS, True), (NOW + 0.25, True), (NOW + 0.25 + EPS, False)],
    ids=EDGES,
)
def test_a_reply_exactly_at_the_deadline_is_used(
    clock: SimpleNamespace, arrival: float, used: bool
) -> None:
    book = RequestBook(ClientOptions(deadline_s=0.25))
    deadline_at = book.deadline_at()
    assert deadline_at == NOW + 0.25
    clock.now = arrival
    if used:
        result = book.result_for(prepared(deadline_at), received(), 1.0)
        assert result.actions.tolist() == [[0.5, -0.5]]
    else:
        with pytest.raises(DeadlineExceededError, match="after its deadline"):
            book.result_for(prepared(deadline_at), received(), 1.0)
    assert book.stats.late_replies == int(not used)


@pytest.mark.parametrize(
    ("now", "wait"),
    [(NOW + 0.25 - 2 * EPS, 2 * EPS), (NOW + 0.25, None), (NOW + 0.25 + EPS, None)],
    ids=EDGES,
)
def test_the_wait_for_a_reply_ends_at_the_deadline(
    clock: SimpleNamespace, now: float, wait: float | None
) -> None:
    """The wait is the time left; with none left (at the deadline or past it), no wait starts."""
    book = RequestBook(ClientOptions(deadline_s=0.25))
    request = prepared(book.deadline_at())
    clock.now = now
    if wait is not None:
        assert book.budget(request) == wait
        with book.waiting(request) as timeout_s:
            assert timeout_s == wait
    else:
        with pytest.raises(DeadlineExceededError, match="past its deadline"):
            book.budget(request)
        assert book.stats.late_replies == 1


def test_the_whole_time_left_bounds_the_exchange_and_only_a_timeout_at_the_deadline_is_its(
    clock: SimpleNamespace,
) -> None:
    """The transport gets the time left however long its own per-read timeout is; a read
    timeout before the deadline stays a plain `RequestTimeoutError`."""
    book = RequestBook(ClientOptions(deadline_s=0.25))
    request = prepared(book.deadline_at())
    with pytest.raises(RequestTimeoutError) as caught, book.waiting(request) as timeout_s:
        assert timeout_s == 0.25
        clock.now = NOW + 0.25 - 0.002  # a per-read timeout, before the deadline
        raise RequestTimeoutError("read timed out")
    assert type(caught.value) is RequestTimeoutError and book.stats.late_replies == 0
    clock.now = NOW
    with pytest.raises(DeadlineExceededError), book.waiting(request):
        clock.now = NOW + 0.25 - 0.0005  # a timer that fired within its clock's resolution
        raise RequestTimeoutError("time is up")
    assert book.stats.late_replies == 1

"""The action API's calls as steps (SGLang's and the reference server's, and openpi's websocket):
the client's fitting, limits and counters around its requests and replies.

`ActionApiSession` is written once for both clients as generators of I/O steps (see
`vla_client.transports.drive`), as `vla_client.client.gr00t` and `vla_client.client.dialect`
are: `ActionClient` drives them blocking, `AsyncActionClient` under asyncio, over an HTTP or a
websocket transport. The requests and replies are `vla_client.protocol`'s (`encode_request`,
`read_reply`); the fitting, the age check, the deadline and the counters are the client's
`RequestBook`, as on every endpoint. Requests and metadata reads are retried per the client's
`RetryPolicy`.

The metadata to fit observations to comes from the connection: on a websocket it is the first
frame of the current connection (so a reconnect is checked afresh); over HTTP, which hides its
connections, it is read once and read again after a connection failed or the server refused a
request (a 4xx), since the server may have been replaced by one announcing something else.

openpi's replies carry no request id, so on its websocket only their order says which request
each answers: the transport is told so (it replaces a connection on which a frame arrived
unasked), and a reply that cannot be read discards the connection, since whatever else the
server sends for that request would be taken for the next one's reply.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import partial
from typing import Any

from vla_client.client.request_book import PreparedRequest, Received, RequestBook
from vla_client.client.result import ActionResult
from vla_client.errors import ConnectError, ProtocolError, ServerError
from vla_client.observation import Observation
from vla_client.protocol import ActionMetadata, Reply, read_metadata
from vla_client.transports.drive import Offload, Steps, called
from vla_client.transports.retry import RetryPolicy, retried


class ActionApiSession:
    """One client's calls to an action API server (or openpi's websocket) over `transport`;
    `stream` says the transport is a websocket (`ReplyStream`), whose replies arrive in order
    on one connection and can be read past."""

    def __init__(
        self, book: RequestBook, transport: Any, retry: RetryPolicy, *, stream: bool
    ) -> None:
        self._book = book
        self._transport = transport
        self._retry = retry
        self._stream = stream
        self._without_ids = stream and book.options.layout is not None
        """openpi's websocket: replies without request ids, told apart by order alone."""
        if stream:
            transport.on_drop = book.dropped
            transport.replies_without_ids = self._without_ids
        self._http_metadata: ActionMetadata | None = None
        """The server's metadata as last read over HTTP; None: read it again."""
        self._contract_read: tuple[Any, ActionMetadata] | None = None
        """The last metadata document read for the contract, and what it read as."""

    def metadata(self) -> Steps[ActionMetadata]:
        """The server's policy description, read afresh as requests are sent: retried per the
        policy, waiting for a server that is warming up."""
        read = partial(called, self._transport.metadata)
        return read_metadata((yield from retried(read, self._retry, on_retry=self._book.retried)))

    def contract(self, deadline_at: float | None) -> Steps[ActionMetadata | None]:
        """The metadata to fit observations to: None with ``check_contract=False``; on a
        websocket, the current connection's (connecting if needed); over HTTP, the one kept, or
        read again. Reading it is retried as requests are."""
        book = self._book
        if not book.options.check_contract:
            return None
        if not self._stream and self._http_metadata is not None:
            return self._http_metadata
        budget_s = None if deadline_at is None else deadline_at - time.monotonic()
        return (
            yield from retried(
                partial(self._read_contract, deadline_at),
                self._retry,
                budget_s=budget_s,
                on_retry=book.retried,
            )
        )

    def _read_contract(self, deadline_at: float | None) -> Steps[ActionMetadata]:
        """The server's metadata document read as the metadata to check against (kept, over
        HTTP); a server that announces nothing (404) gives empty metadata; what
        `read_metadata` refuses is a `ProtocolError`. A websocket hands over the same document
        for every request on a connection: it is read once."""
        try:
            timeout_s = self._book.wait_until(deadline_at)
            with self._book.bounded_by(deadline_at, "metadata from the server"):
                document = yield partial(self._transport.metadata, timeout_s=timeout_s)
        except ServerError as exc:
            if exc.status_code != 404:  # a server without metadata announces nothing
                raise
            document = None
        if self._contract_read is None or self._contract_read[0] is not document:
            metadata = read_metadata({} if document is None else document)
            self._contract_read = (document, metadata)
        metadata = self._contract_read[1]
        if not self._stream:
            self._http_metadata = metadata
        return metadata

    def reset(self) -> Steps[None]:
        """Nothing: the action API and openpi's websocket keep no episode state."""
        yield from ()  # no steps

    def infer(
        self,
        observation: Observation,
        parameters: Mapping[str, Any],
        request_id: str | None,
        runtime: Mapping[str, Any] | None = None,
    ) -> Steps[ActionResult]:
        """One inference: `observation` fitted to the contract and encoded with `parameters`
        and `runtime` as the request's blocks, sent (retries included) and its reply read.

        A websocket reply to another request is counted and skipped, and the next one read,
        until the one for this request comes or the deadline or the read timeout ends the wait.
        """
        book = self._book
        deadline_at = book.deadline_at()
        fitter = book.fitter((yield from self.contract(deadline_at)))
        prepared: PreparedRequest = yield Offload(
            partial(book.prepare, observation, parameters, runtime, request_id,
                    fitter=fitter, deadline_at=deadline_at)
        )  # fmt: skip
        start = time.perf_counter()
        received = yield from retried(
            partial(self._attempt, prepared),
            self._retry,
            budget_s=book.budget(prepared),
            on_retry=book.retried,
        )
        while True:
            round_trip_ms = (time.perf_counter() - start) * 1000
            try:
                result = book.result_for(prepared, received, round_trip_ms, can_skip=self._stream)
            except ProtocolError:
                self._unreadable()
                raise
            if result is not None:
                return result
            received = yield from self._receive(prepared)

    def _unreadable(self) -> None:
        """After a reply that cannot be read on openpi's websocket: its connection carries no
        other request (what else the server sends for this one would be taken for the next
        one's reply)."""
        if self._without_ids:
            self._transport.discard("unreadable reply")

    def _attempt(self, prepared: PreparedRequest) -> Steps[Received]:
        """One try at `prepared`'s exchange."""
        try:
            exchange = self._transport.exchange
            if prepared.frames is not None:  # ipc://: they travel apart, in shared memory
                exchange = partial(exchange, frames=prepared.frames)
            with self._book.waiting(prepared) as timeout_s:
                reply = yield partial(
                    exchange, prepared.body, prepared.content_type, prepared.accept,
                    timeout_s=timeout_s,
                )  # fmt: skip
        except ConnectError:
            self._http_metadata = None  # the server may have come back as another
            raise
        return (yield from self._read(prepared, reply))

    def _receive(self, prepared: PreparedRequest) -> Steps[Received]:
        """The websocket's next reply, read past one to another request."""
        with self._book.waiting(prepared) as timeout_s:
            reply = yield partial(self._transport.receive, timeout_s=timeout_s)
        return (yield from self._read(prepared, reply))

    def _read(self, prepared: PreparedRequest, reply: Reply) -> Steps[Received]:
        """`reply` read; after a server's error, a websocket's connection is dropped (the
        server ends it) and, after a 4xx, the HTTP metadata read again."""
        try:
            return self._book.read(prepared, reply)
        except ProtocolError:
            self._unreadable()
            raise
        except ServerError as exc:
            if self._stream:  # the server ends a websocket after an error
                yield self._transport.reset
            if 400 <= exc.status_code < 500:  # it may be another server now: read it again
                self._http_metadata = None
            raise

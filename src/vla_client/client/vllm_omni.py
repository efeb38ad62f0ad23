"""vLLM-Omni's robot endpoint as steps: the client's fitting, limits and counters around its
messages.

`OmniSession` is written once for both clients as generators of I/O steps (see
`vla_client.transports.drive`), as `vla_client.client.gr00t` is: `ActionClient` drives them
blocking, `AsyncActionClient` under asyncio, over the websocket transport. The messages are
`vla_client.protocol.vllm_omni`'s; the fitting (camera map, resize), the age check, the
deadline and the counters are the client's `RequestBook`, as on every endpoint.

The server's config is the first frame of each connection, so it is read again whenever the
transport has connected anew. The session id is the client's: made when the client is, and
made again by `reset`, so each episode is a new session at the server.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from vla_client.client.core import PreparedRequest, RequestBook
from vla_client.client.fit import FramePreprocessor
from vla_client.client.result import ActionResult, Timings
from vla_client.codecs import msgpack_numpy
from vla_client.errors import CodecError, ProtocolError
from vla_client.observation import Observation
from vla_client.protocol import MSGPACK_CONTENT_TYPE, ActionMetadata, Reply, new_request_id
from vla_client.protocol.reply_read import read_reply
from vla_client.protocol.vllm_omni import (
    OmniConfig,
    read_actions,
    read_answer,
    read_config,
    read_reset,
    request_document,
    reset_document,
)
from vla_client.transports.drive import Offload, Steps


def new_session_id() -> str:
    """A session id no other client shares."""
    return uuid.uuid4().hex


class OmniSession:
    """One client's calls to vLLM-Omni's robot endpoint over `transport` (a websocket transport
    opened on ``/v1/realtime/robot/openpi``)."""

    def __init__(self, book: RequestBook, transport: Any) -> None:
        self._book = book
        self._transport = transport
        self.session_id = new_session_id()
        """The id sent with each request when the server asks for one; new after `reset`."""
        self._config: tuple[Any, OmniConfig, ActionMetadata] | None = None

    def config(self, deadline_at: float | None) -> Steps[tuple[OmniConfig, ActionMetadata]]:
        """The current connection's config (connecting if needed), and its metadata."""
        timeout_s = self._book.wait_until(deadline_at)
        document = yield partial(self._transport.metadata, timeout_s=timeout_s)
        if self._config is None or self._config[0] is not document:
            config = read_config(document)
            self._config = (document, config, config.metadata())
        return self._config[1], self._config[2]

    def metadata(self) -> Steps[ActionMetadata]:
        """The server's config as the action API's metadata (image size, horizon)."""
        return (yield from self.config(self._book.deadline_at()))[1]

    def _exchange(self, body: bytes, timeout_s: float | None) -> Steps[tuple[Any, int]]:
        """Send `body`; the answer's document and size. An error frame is `ServerErrorFrame`
        (the connection stays open, as the server keeps it), a text frame `ServerError`."""
        reply: Reply = yield partial(
            self._transport.exchange,
            body, MSGPACK_CONTENT_TYPE, MSGPACK_CONTENT_TYPE, timeout_s=timeout_s,
        )  # fmt: skip
        if reply.status != 200:
            read_reply(reply)  # raises the server's error
        try:
            document = msgpack_numpy.unpackb(reply.content)
        except CodecError as exc:
            raise ProtocolError(f"vLLM-Omni's answer is not msgpack: {exc}") from None
        return read_answer(document), len(reply.content)

    def reset(self) -> Steps[None]:
        """End the server's session and start a new one: the next request is a new episode."""
        deadline_at = self._book.deadline_at()
        yield from self.config(deadline_at)  # connected, its config read
        body = msgpack_numpy.packb(reset_document(self.session_id))
        answer, _ = yield from self._exchange(body, self._book.wait_until(deadline_at))
        read_reset(answer)
        self.session_id = new_session_id()

    def infer(
        self, observation: Observation, options: Mapping[str, Any], request_id: str | None
    ) -> Steps[ActionResult]:
        """One request: `observation` fitted to the config and sent, the reply's actions
        flattened as `read_actions` does. The endpoint takes no parameters."""
        if options:
            raise ValueError(
                f"vLLM-Omni's robot endpoint takes the observation only, not {sorted(options)}"
            )
        book = self._book
        deadline_at = book.deadline_at()
        config, metadata = yield from self.config(deadline_at)
        fitter = book.fitter(metadata if book.options.check_contract else None)
        prepared = yield Offload(partial(self._prepare, observation, config, fitter))
        prepared = replace(prepared, request_id=request_id or prepared.request_id,
                           deadline_at=deadline_at)  # fmt: skip
        start = time.perf_counter()
        with book.waiting(prepared) as timeout_s:
            answer, bytes_received = yield from self._exchange(prepared.body, timeout_s)
        round_trip_ms = (time.perf_counter() - start) * 1000
        book.check_in_time(prepared)
        read_start = time.perf_counter()
        actions, action_keys = read_actions(answer, config)
        return ActionResult(
            actions=actions,
            request_id=prepared.request_id,
            timings=Timings(
                fit_ms=prepared.fit_ms,
                encode_ms=prepared.encode_ms,
                round_trip_ms=round_trip_ms,
                decode_ms=(time.perf_counter() - read_start) * 1000,
                bytes_sent=len(prepared.body),
                bytes_received=bytes_received,
            ),
            raw=dict(answer) if isinstance(answer, Mapping) else {"actions": answer},
            action_keys=action_keys,
        )

    def _prepare(
        self, observation: Observation, config: OmniConfig, fitter: FramePreprocessor
    ) -> PreparedRequest:
        book = self._book
        fitted, fit_ms = book.fitted(observation, fitter)
        start = time.perf_counter()
        body = msgpack_numpy.packb(request_document(fitted, config, self.session_id))
        book.stats.sent += 1
        return PreparedRequest(
            body=body,
            content_type=MSGPACK_CONTENT_TYPE,
            accept=MSGPACK_CONTENT_TYPE,
            request_id=new_request_id(),
            fit_ms=fit_ms,
            encode_ms=(time.perf_counter() - start) * 1000,
        )

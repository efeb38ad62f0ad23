"""GR00T's calls as steps: the client's fitting, limits and counters around GR00T's messages.

`Gr00tSession` is written once for both clients as generators of I/O steps (see
`vla_client.transports.drive`): `ActionClient` drives them blocking, `AsyncActionClient` under
asyncio. The messages are `vla_client.protocol.gr00t`'s; the fitting (camera map, resize), the
age check, the deadline and the counters are the client's `RequestBook`, as on every endpoint.

The policy's modality config is read with the first call and kept; it is read again after the
connection failed, since the server may have come back as another.

An ``rtc`` call option (real-time chunking, as `ChunkExecutor` sends it) travels in GR00T's own
terms (`vla_client.protocol.gr00t_rtc`), its prefix cut per action key by the sizes of the last
reply.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from vla_client.client.core import PreparedRequest, RequestBook
from vla_client.client.fit import FramePreprocessor
from vla_client.client.result import ActionResult, Timings
from vla_client.errors import ReplyTooLargeError, TransportError
from vla_client.observation import Observation
from vla_client.protocol import MSGPACK_CONTENT_TYPE, ActionMetadata, new_request_id
from vla_client.protocol.gr00t import (
    Call,
    Gr00tConfig,
    message,
    observation_document,
    read_actions,
    read_answer,
    read_modality_config,
)
from vla_client.protocol.gr00t_rtc import PREVIOUS_KEY, rtc_request
from vla_client.protocol.rtc import PARAMETER
from vla_client.transports.drive import Offload, Steps


class Gr00tSession:
    """One client's calls to a GR00T policy server over `transport` (a ZeroMQ transport, whose
    ``call`` sends bytes and returns the reply's); `api_key` travels as the ``api_token``."""

    def __init__(self, book: RequestBook, transport: Any, api_key: str | None) -> None:
        self._book = book
        self._transport = transport
        self._api_token = api_key
        self._config: tuple[Gr00tConfig, ActionMetadata] | None = None
        self._action_columns: dict[str, slice] | None = None
        """Each action key's columns in the last reply: GR00T's config does not size them."""

    def _exchange(self, body: bytes, timeout_s: float | None) -> Steps[tuple[Any, int]]:
        """Send `body`; the reply's document (`ServerError` for an error reply) and size."""
        try:
            reply = yield partial(self._transport.call, body, timeout_s=timeout_s)
        except (TransportError, ReplyTooLargeError):
            self._config = None  # the server may come back as another
            raise
        return read_answer(reply), len(reply)

    def _call(self, call: Call, data: Mapping[str, Any] | None = None) -> Steps[Any]:
        """`call` with `data`, within the client's deadline."""
        body = message(call, data, self._api_token)
        timeout_s = self._book.wait_until(self._book.deadline_at())
        return (yield from self._exchange(body, timeout_s))[0]

    def config(self) -> Steps[tuple[Gr00tConfig, ActionMetadata]]:
        """The policy's modality config, and its metadata, read once per connection."""
        if self._config is None:
            config = read_modality_config((yield from self._call("get_modality_config")))
            self._config = (config, config.metadata(self._book.options.state_split))
        return self._config

    def metadata(self) -> Steps[ActionMetadata]:
        """The server's description as the action API's metadata (cameras, horizon)."""
        return (yield from self.config())[1]

    def reset(self) -> Steps[None]:
        """GR00T's ``reset``: the policy starts a new episode."""
        yield from self._call("reset", {"options": None})

    def infer(
        self, observation: Observation, options: Mapping[str, Any], request_id: str | None
    ) -> Steps[ActionResult]:
        """One ``get_action``: `observation` fitted and sent, `options` as GR00T's options
        (None when empty; an ``rtc`` one as `rtc_request` maps it), the reply's per-key actions
        joined as `read_actions` does."""
        book = self._book
        deadline_at = book.deadline_at()
        config, metadata = yield from self.config()
        options = dict(options)
        previous = None
        if PARAMETER in options:
            rtc = options.pop(PARAMETER)
            previous, options = rtc_request(rtc, config, self._action_columns, options)
        fitter = book.fitter(metadata if book.options.check_contract else None)
        prepared = yield Offload(
            partial(self._prepare, observation, options or None, previous, config, fitter)
        )
        prepared = replace(prepared, request_id=request_id or prepared.request_id,
                           deadline_at=deadline_at)  # fmt: skip
        start = time.perf_counter()
        with book.waiting(prepared) as timeout_s:
            answer, bytes_received = yield from self._exchange(prepared.body, timeout_s)
        round_trip_ms = (time.perf_counter() - start) * 1000
        book.check_in_time(prepared)
        read_start = time.perf_counter()
        actions, action_keys = read_actions(answer, config)
        self._action_columns = action_keys
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
            raw={"actions": answer[0], "info": answer[1]},
            action_keys=action_keys,
        )

    def _prepare(
        self,
        observation: Observation,
        options: dict[str, Any] | None,
        previous: dict[str, Any] | None,
        config: Gr00tConfig,
        fitter: FramePreprocessor,
    ) -> PreparedRequest:
        book = self._book
        fitted, fit_ms = book.fitted(observation, fitter)
        start = time.perf_counter()
        document = observation_document(fitted, config, book.options.state_split)
        if previous is not None:
            document[PREVIOUS_KEY] = previous
        body = message("get_action", {"observation": document, "options": options}, self._api_token)
        book.stats.sent += 1
        return PreparedRequest(
            body=body,
            content_type=MSGPACK_CONTENT_TYPE,
            accept=MSGPACK_CONTENT_TYPE,
            request_id=new_request_id(),
            fit_ms=fit_ms,
            encode_ms=(time.perf_counter() - start) * 1000,
        )

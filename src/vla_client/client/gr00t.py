"""GR00T's calls as steps: the client's fitting, limits and counters around GR00T's messages.

`Gr00tSession` is written once for both clients as generators of I/O steps (see
`vla_client.transports.drive`): `ActionClient` drives them blocking, `AsyncActionClient` under
asyncio. The messages are `vla_client.protocol.families.gr00t`'s; the fitting (camera map,
resize), the age check, the deadline and the counters are the client's `RequestBook`, as on
every endpoint.

The policy's modality config is read with the first call and kept; it is read again when the
server may have changed: after the connection failed, after ZeroMQ reported the connection
dropped (it reconnects by itself, silently, to whatever server is then on the address: one
restarted with another policy, say), and once after a reply that contradicts it (its horizon
or action keys), whose request is then sent again under the config read anew, if that changed;
only a reply that contradicts the config just read is refused.

An ``rtc`` call option (real-time chunking, as `ChunkExecutor` sends it) travels in GR00T's own
terms (`vla_client.protocol.families.gr00t_rtc`), its prefix cut per action key by the sizes of
the last reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from vla_client.client.request_book import RequestBook, refuse_runtime
from vla_client.client.result import ActionResult
from vla_client.errors import ProtocolError, ReplyTooLargeError, TransportError
from vla_client.observation import Observation
from vla_client.protocol import MSGPACK_CONTENT_TYPE, ActionMetadata
from vla_client.protocol.families.gr00t import (
    Call,
    Gr00tConfig,
    message,
    observation_document,
    read_actions,
    read_answer,
    read_modality_config,
)
from vla_client.protocol.families.gr00t_rtc import PREVIOUS_KEY, rtc_request
from vla_client.protocol.rtc import PARAMETER
from vla_client.transports.drive import Steps


class Gr00tSession:
    """One client's calls to a GR00T policy server over `transport` (a ZeroMQ transport, whose
    ``call`` sends bytes and returns the reply's); `api_key` travels as the ``api_token``."""

    def __init__(self, book: RequestBook, transport: Any, api_key: str | None) -> None:
        self._book = book
        self._transport = transport
        self._api_token = api_key
        self._config: tuple[Gr00tConfig, ActionMetadata] | None = None
        self._drops_seen = 0
        """The transport's `connection_drops` when the config was read."""
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
        """`call` with `data`, within the client's deadline: an answer not come by then is a
        `DeadlineExceededError`, as a late reply to `infer` is."""
        body = message(call, data, self._api_token)
        deadline_at = self._book.deadline_at()
        timeout_s = self._book.wait_until(deadline_at)
        with self._book.bounded_by(deadline_at, f"answer to {call} from GR00T's server"):
            return (yield from self._exchange(body, timeout_s))[0]

    def config(self) -> Steps[tuple[Gr00tConfig, ActionMetadata]]:
        """The policy's modality config, and its metadata: read once, and again when the
        connection has dropped since (the server on the address may be another now)."""
        drops = yield from self._connection_drops()
        if self._config is None or drops != self._drops_seen:
            config = read_modality_config((yield from self._call("get_modality_config")))
            self._config = (config, config.metadata(self._book.options.state_split))
            self._drops_seen = drops
        return self._config

    def _connection_drops(self) -> Steps[int]:
        """The transport's count of dropped connections (ZeroMQ's transports, the only ones
        GR00T's session runs on, count them)."""
        return int((yield self._transport.connection_drops))

    def metadata(self) -> Steps[ActionMetadata]:
        """The server's description as the action API's metadata (cameras, horizon)."""
        return (yield from self.config())[1]

    def contract(self, deadline_at: float | None) -> Steps[ActionMetadata | None]:
        """The metadata observations are fitted to; None with ``check_contract=False``."""
        if not self._book.options.check_contract:
            return None
        return (yield from self.config())[1]

    def reset(self) -> Steps[None]:
        """GR00T's ``reset``: the policy starts a new episode."""
        yield from self._call("reset", {"options": None})

    def infer(
        self,
        observation: Observation,
        options: Mapping[str, Any],
        request_id: str | None,
        runtime: Mapping[str, Any] | None = None,
    ) -> Steps[ActionResult]:
        """One ``get_action``: `observation` fitted and sent, `options` as GR00T's options
        (None when empty; an ``rtc`` one as `rtc_request` maps it), the reply's per-key actions
        joined as `read_actions` does. GR00T takes no `runtime` block."""
        refuse_runtime(runtime)
        deadline_at = self._book.deadline_at()
        before = yield from self.config()
        try:
            return (yield from self._infer(observation, options, request_id, deadline_at, before))
        except ProtocolError:
            self._config = None  # the reply contradicts it: read it again, once
            now = yield from self.config()
            if now[0] == before[0]:
                raise
        return (yield from self._infer(observation, options, request_id, deadline_at, now))

    def _infer(
        self,
        observation: Observation,
        options: Mapping[str, Any],
        request_id: str | None,
        deadline_at: float | None,
        read: tuple[Gr00tConfig, ActionMetadata],
    ) -> Steps[ActionResult]:
        """One ``get_action`` under the config `read` (and its metadata), within
        `deadline_at`."""
        config, metadata = read
        options = dict(options)
        previous = None
        if PARAMETER in options:
            rtc = options.pop(PARAMETER)
            previous, options = rtc_request(rtc, config, self._action_columns, options)
        encode = partial(self._encode, options or None, previous, config)
        steps = self._book.message_round(
            observation, metadata, request_id, deadline_at, encode, self._exchange,
            partial(self._read, config),
        )  # fmt: skip
        return (yield from steps)

    def _encode(
        self,
        options: dict[str, Any] | None,
        previous: dict[str, Any] | None,
        config: Gr00tConfig,
        observation: Observation,
    ) -> tuple[bytes, str]:
        """The ``get_action`` message for the fitted `observation`, with GR00T's `options` and,
        for real-time chunking, the `previous` chunk's prefix."""
        document = observation_document(observation, config, self._book.options.state_split)
        if previous is not None:
            document[PREVIOUS_KEY] = previous
        data = {"observation": document, "options": options}
        return message("get_action", data, self._api_token), MSGPACK_CONTENT_TYPE

    def _read(self, config: Gr00tConfig, answer: Any) -> tuple[Any, Any, dict[str, Any]]:
        """The ``[actions, info]`` answer's actions joined in the config's key order; each
        key's columns kept for the next real-time chunking request."""
        actions, action_keys = read_actions(answer, config)
        self._action_columns = action_keys
        return actions, action_keys, {"actions": answer[0], "info": answer[1]}

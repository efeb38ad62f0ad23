"""Websocket server families with their own dialect (vLLM-Omni's robot endpoint, RoboArena's
policy server) as steps: the client's fitting, limits and counters around their messages.

`DialectSession` is written once for every such family and both clients, as generators of I/O
steps (see `vla_client.transports.drive`), as `vla_client.client.gr00t` is: `ActionClient`
drives them blocking, `AsyncActionClient` under asyncio, over the websocket transport. The
messages are the family's module's (a `Dialect`: `vla_client.protocol.families.vllm_omni`,
`vla_client.protocol.families.roboarena`); the fitting (camera map, resize), the age check, the
deadline and the counters are the client's `RequestBook`, as on every endpoint.

The server's config is the first frame of each connection, so it is read again whenever the
transport has connected anew. These replies carry no request id, so only their order on the
connection says which request each answers: the transport is told so (it replaces a connection
on which a frame arrived unasked), and after an error frame or a reply that cannot be read the
connection is discarded, since what else the server sends for that request would be taken for
the next one's reply. The session id is the client's: made when the client is, and
made again by `reset`, so each episode is a new session at the server.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Mapping
from functools import partial
from typing import Any, Protocol, TypeVar

from vla_client.client.request_book import RequestBook, refuse_runtime
from vla_client.client.result import ActionResult
from vla_client.codecs import msgpack_numpy
from vla_client.errors import CodecError, ContractError, ProtocolError, ServerErrorFrame
from vla_client.observation import Observation
from vla_client.protocol import MSGPACK_CONTENT_TYPE, ActionMetadata, Reply
from vla_client.protocol.reply_read import read_reply
from vla_client.transports.drive import Steps

TEXT = "text/plain"
T = TypeVar("T")


class Dialect(Protocol):
    """What a family's protocol module gives (see `vla_client.protocol.families.vllm_omni`): its
    `NAME`, and functions that read its config, build its requests and read its answers."""

    NAME: str
    TEXT_ANSWERS: frozenset[str]
    """Text frames that answer a request; any other text frame is the server's error."""

    def read_config(self, document: Any) -> Any: ...
    def metadata(self, config: Any) -> ActionMetadata: ...
    def cameras(self, config: Any) -> tuple[str, ...] | None: ...
    def request_document(
        self, observation: Observation, config: Any, session_id: str
    ) -> dict[str, Any]: ...
    def reset_document(self, config: Any, session_id: str) -> dict[str, Any]: ...
    def read_answer(self, document: Any) -> Any: ...
    def read_actions(self, answer: Any, config: Any) -> tuple[Any, dict[str, slice] | None]:
        """The chunk as float32 ``[H, D]``, an array of the client's own (the answer's arrays
        are read-only views of the received message), and each action key's columns."""
        ...

    def read_reset(self, answer: Any) -> None: ...


def new_session_id() -> str:
    """A session id no other client shares."""
    return uuid.uuid4().hex


class DialectSession:
    """One client's calls to a server speaking `dialect` over `transport` (a websocket
    transport), whose text frames in ``dialect.TEXT_ANSWERS`` are answers, not errors."""

    def __init__(self, book: RequestBook, transport: Any, dialect: Dialect) -> None:
        self._book = book
        self._transport = transport
        self._dialect = dialect
        transport.text_answers = dialect.TEXT_ANSWERS
        transport.replies_without_ids = True
        transport.on_drop = book.dropped
        self.session_id = new_session_id()
        """The id sent with each request when the server asks for one; new after `reset`."""
        self._config: tuple[Any, Any, ActionMetadata] | None = None
        self._dropped: set[str] = set()
        """The cameras already warned about as dropped (each is named once)."""

    def config(self, deadline_at: float | None) -> Steps[tuple[Any, ActionMetadata]]:
        """The current connection's config (connecting if needed), and its metadata; a config
        not come by `deadline_at` is a `DeadlineExceededError`."""
        timeout_s = self._book.wait_until(deadline_at)
        with self._book.bounded_by(deadline_at, f"config from {self._dialect.NAME}"):
            document = yield partial(self._transport.metadata, timeout_s=timeout_s)
        if self._config is None or self._config[0] is not document:
            config = self._dialect.read_config(document)
            self._config = (document, config, self._dialect.metadata(config))
        return self._config[1], self._config[2]

    def metadata(self) -> Steps[ActionMetadata]:
        """The server's config as the action API's metadata (image size, horizon)."""
        return (yield from self.config(self._book.deadline_at()))[1]

    def contract(self, deadline_at: float | None) -> Steps[ActionMetadata | None]:
        """The metadata observations are fitted to; None with ``check_contract=False``."""
        if not self._book.options.check_contract:
            return None
        return (yield from self.config(deadline_at))[1]

    def _exchange(self, body: bytes, timeout_s: float | None) -> Steps[tuple[Any, int]]:
        """Send `body`; the answer's document (a text answer as its text) and size. A text
        frame that is no answer is `ServerError` (the transport has dropped the connection, as
        the server closes it); the dialect's error messages are raised by its `read_answer`."""
        reply: Reply = yield partial(
            self._transport.exchange,
            body, MSGPACK_CONTENT_TYPE, MSGPACK_CONTENT_TYPE, timeout_s=timeout_s,
        )  # fmt: skip
        if reply.status != 200:
            read_reply(reply)  # raises the server's error
        if reply.content_type == TEXT:
            return reply.content.decode(), len(reply.content)
        try:
            document = msgpack_numpy.unpackb(reply.content)
        except CodecError as exc:
            name = self._dialect.NAME
            raise ProtocolError(f"an answer from {name} is not msgpack: {exc}") from None
        return self._dialect.read_answer(document), len(reply.content)

    def reset(self) -> Steps[None]:
        """End the server's session and start a new one: the next request is a new episode."""
        deadline_at = self._book.deadline_at()
        config, _ = yield from self.config(deadline_at)  # connected, its config read
        body = msgpack_numpy.packb(self._dialect.reset_document(config, self.session_id))
        yield from self._guarded(self._reset_round(body, deadline_at))
        self.session_id = new_session_id()

    def _reset_round(self, body: bytes, deadline_at: float | None) -> Steps[None]:
        """Send the reset `body` and check its answer; an answer not come by `deadline_at` is a
        `DeadlineExceededError`."""
        timeout_s = self._book.wait_until(deadline_at)
        with self._book.bounded_by(deadline_at, f"answer to the reset from {self._dialect.NAME}"):
            answer, _ = yield from self._exchange(body, timeout_s)
        self._dialect.read_reset(answer)

    def infer(
        self,
        observation: Observation,
        options: Mapping[str, Any],
        request_id: str | None,
        runtime: Mapping[str, Any] | None = None,
    ) -> Steps[ActionResult]:
        """One request: `observation` fitted to the config and sent, the reply's actions
        flattened as `read_actions` does. The endpoint takes no parameters and no `runtime`
        block."""
        refuse_runtime(runtime)
        if options:
            raise ValueError(
                f"{self._dialect.NAME} takes the observation only, not {sorted(options)}"
            )
        deadline_at = self._book.deadline_at()
        config, metadata = yield from self.config(deadline_at)
        observation = self._asked_cameras(observation, self._dialect.cameras(config))
        encode, read = partial(self._encode, config), partial(self._read, config)
        steps = self._book.message_round(
            observation, metadata, request_id, deadline_at, encode, self._exchange, read
        )
        return (yield from self._guarded(steps))

    def _guarded(self, steps: Steps[T]) -> Steps[T]:
        """`steps`, the connection discarded when they end in an error frame or a reply that
        cannot be read: whatever else the server sends for this request must not be taken
        for the next one's reply."""
        try:
            return (yield from steps)
        except ServerErrorFrame:
            self._transport.discard("error frame")
            raise
        except (ProtocolError, CodecError):
            self._transport.discard("unreadable reply")
            raise

    def _asked_cameras(
        self, observation: Observation, asked: tuple[str, ...] | None
    ) -> Observation:
        """`observation` without the cameras the server does not ask for (named, after the
        camera map, as the server names them), each dropped camera warned about once; as it is
        when the server reads every camera (`asked` None). Its depth frames are kept."""
        if asked is None:
            return observation
        names = self._book.options.camera_map
        kept = {name: frame for name, frame in observation.images.items()
                if names.get(name, name) in asked}  # fmt: skip
        dropped = sorted(set(observation.images) - set(kept) - self._dropped)
        if dropped:
            self._dropped.update(dropped)
            warnings.warn(
                f"{self._dialect.NAME} asks for cameras {list(asked)}; not sending {dropped}",
                stacklevel=6,  # the line that called the client's infer: past this method,
                # `infer`, the two frames of `drive` (or `adrive`) and the client's `infer`
            )
        if len(kept) == len(observation.images):
            return observation
        if not kept:
            raise ContractError("cameras", list(asked), sorted(observation.images))
        times = {name: t for name, t in observation.capture_times.items() if name in kept}
        # the depth frames go on, for the request to refuse them as on every path
        return Observation(kept, observation.state, observation.task, times, observation.depth)

    def _encode(self, config: Any, observation: Observation) -> tuple[bytes, str]:
        """The family's request for the fitted `observation`, in this session."""
        document = self._dialect.request_document(observation, config, self.session_id)
        return msgpack_numpy.packb(document), MSGPACK_CONTENT_TYPE

    def _read(self, config: Any, answer: Any) -> tuple[Any, Any, dict[str, Any]]:
        """The answer's actions, flattened in the order `config` announces."""
        actions, action_keys = self._dialect.read_actions(answer, config)
        raw = dict(answer) if isinstance(answer, Mapping) else {"actions": answer}
        return actions, action_keys, raw

"""`ActionClient`: blocking client for the action API, over HTTP or a websocket."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from vla_client.client.base import ClientBase
from vla_client.client.request_book import runtime_block
from vla_client.client.result import ActionResult
from vla_client.observation import Observation
from vla_client.protocol import ActionMetadata
from vla_client.transports.base import ReplyStream, Transport
from vla_client.transports.drive import drive


class ActionClient(ClientBase[Transport]):
    """Send observations to a policy server and get action chunks back.

    Example::

        with ActionClient("http://127.0.0.1:8000", encoding="png") as client:
            observation = Observation({"wrist": frame}, state=q, task="pick up the cup")
            result = client.infer(observation)
            result.actions  # float32 [H, D]

    A ``ws://`` URL (or ``transport="websocket"``, or an `endpoint`) keeps one websocket open
    instead: ``/v1/actions/realtime`` by default, or openpi's ``/openpi/policy`` with
    ``endpoint="openpi"``, which sends the flat openpi observation. Websockets carry msgpack.
    Requests are retried per `retry` when the connection never opened or the server answered
    503 with Retry-After, over either transport. `stats` counts what was refused or discarded.

    Args:
        base_url: ``http(s)://host:port``, ``ws(s)://`` for a websocket, or ``ipc://PATH`` for
            a server's Unix socket on this host, frames in shared memory (``serve --ipc``).
        options: The fitting, encoding and time-limit options in one `ClientOptions` value
            (``encoding`` through ``check_contract``), instead of as keywords; giving one both
            ways is a `ValueError`, even when the keyword repeats its default.
        encoding: ``png``, ``jpeg``, ``raw`` or ``pixels`` (default ``png``; ``raw`` on openpi).
        wire: ``json`` or ``msgpack`` (default ``json`` on HTTP; websockets are msgpack only).
        timeout_s: Seconds to wait for each read of a reply (a frame, on a websocket).
        api_key: Sent as ``Authorization: Bearer`` (``Api-Key`` on openpi's endpoint);
            None: the ``VLA_CLIENT_API_KEY`` environment variable's value, if it is set.
        jpeg_quality: JPEG quality (1..100) for ``encoding="jpeg"``.
        transport: ``"http"``, ``"websocket"``, or a ready `Transport` (default: by URL scheme).
        endpoint: Websocket endpoint, ``realtime`` (default) or ``openpi``; ``vllm_omni``
            (vLLM-Omni's ``/v1/realtime/robot/openpi``, which its URL path also selects) or
            ``roboarena`` (RoboArena's policy server) for those servers' own dialects;
            ``gr00t`` for GR00T's ZeroMQ server.
        max_observation_age_s: Older observations raise `StaleObservationError`, unsent.
        deadline_s: Seconds from `infer`; no reply by then raises `DeadlineExceededError`,
            whatever the transport, retries, connecting and a slow body included.
        max_reply_bytes: Largest reply read, in bytes; a longer one is cut off with
            `ReplyTooLargeError` (default: sized from the server's announced action horizon x
            dim, at least 1 MiB).
        retry: How requests are retried (default `RetryPolicy()`: 3 attempts within 5 s).
        layout: The openpi request layout, for openpi's endpoint (implies it): ``flat``,
            ``droid``, ``libero``, ``aloha``, an `OpenpiLayout` or a function (default: flat).
        camera_map: Robot camera name -> the server's name, for cameras named otherwise
            (``{"front": "base_0_rgb"}``); a camera named after a server camera or one of its
            aliases needs no entry.
        resize: How frames meet the server's image size: ``auto`` (pad, only where the server
            refuses other sizes), ``pad`` (keep the aspect, black bars), ``crop`` (centre),
            ``none``.
        image_size: ``(height, width)`` to resize to instead of the server's size.
        check_contract: Check each observation against the server's metadata (cameras, image
            size, state length) before sending; False sends it as it is.
        state_split: GR00T's server only: how a flat state vector is cut into its state keys,
            in the vector's order (``{"arm": 6, "gripper": 1}``: the first six values are
            ``arm``); not needed when the state is given as a dict of named arrays.
        connect_timeout_s: GR00T's server only: how long each call waits for the connection
            to open (ZeroMQ keeps trying an address where nothing listens yet) before
            `ConnectError` says nothing answers there (default 5 s).
    """

    _stream_type = ReplyStream
    _transport_prefix = ""

    def metadata(self) -> ActionMetadata:
        """The server's policy description (cameras, image size, action horizon and dims),
        read as requests are sent: retried per `retry`, and waiting for a server that is
        warming up."""
        return drive(self._session.metadata())

    def infer(
        self,
        observation: Observation,
        *,
        request_id: str | None = None,
        runtime: dict[str, Any] | None = None,
        return_digest: bool = False,
        **parameters: Any,
    ) -> ActionResult:
        """One inference: `parameters` become the request's ``parameters`` block.

        The reply is always the one for this request (`request_id`, or a fresh id): on a
        websocket a reply to another request is skipped and the next one read.
        """
        block = runtime_block(runtime, return_digest)
        return drive(self._session.infer(observation, parameters, request_id, block))

    def fit(self, observation: Observation) -> Observation:
        """`observation` as `infer` sends it: its cameras renamed and resized to the server's
        metadata (read as `infer` reads it) and the options; `ContractError` where it does not
        fit. What a log of the frames sent shows (`vla_client.viz.RerunLog`)."""
        contract = drive(self._session.contract(self._book.deadline_at()))
        return self._book.fitter(contract)(observation)

    def reset(self) -> None:
        """Start a new episode: GR00T's server resets its policy; vLLM-Omni's robot endpoint
        ends the session and the next request starts a new one. The action API (SGLang's and
        the reference server's) and openpi's websocket keep no episode state between
        requests, so there it does nothing. `ControlLoop` and ``vla-client eval`` call it at
        each episode's start."""
        drive(self._session.reset())

    def close(self) -> None:
        """Close the connection (pool)."""
        self._transport.close()

    def __enter__(self) -> ActionClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

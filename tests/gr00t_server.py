"""A GR00T policy server for the tests, written from GR00T's published protocol.

NVIDIA Isaac GR00T's own server (``gr00t/policy/server_client.py``) cannot run here: its package
is not on PyPI and imports torch, transformers and its model code at the top. This one follows
what that code documents and does, and shares nothing with vla-client's GR00T code (so a
mistake in one is not repeated in the other):

- a ZeroMQ REP socket; each request a msgpack map ``{"endpoint", "data", "api_token"}``, each
  reply one msgpack message; arrays as ``{"__ndarray_class__": True, "as_npy": np.save bytes}``,
  modality configs as ``{"__ModalityConfig_class__": True, "as_json": {...}}``;
- a wrong ``api_token`` answers ``{"error": "Unauthorized: Invalid API token"}``; an unknown
  endpoint or any failure ``{"error": str(exception)}``;
- ``ping``, ``kill``, ``get_modality_config`` (no data), ``get_action(observation, options)``
  answering ``[actions, info]``, ``reset(options)`` answering ``{}``;
- ``get_action`` checks the observation as ``Gr00tPolicy.check_observation`` does: every
  configured video key a uint8 ``(B, T, H, W, 3)`` array with T the video's delta count, every
  state key a float32 ``(B, T, D)`` array (float64 refused), every language key ``[[text]]``,
  one batch size throughout; its actions are float32 ``(B, H, D)`` per action key.

Every request's bytes are kept (`frames`) for the tests to check bit for bit. The actions are
a pattern the tests can predict: action key ``k`` (its index in the config), step ``t``,
column ``d`` is ``100 k + 10 t + d`` plus the sum of all state values. The reply's action map
lists the keys in reverse config order, so a client that trusts map order is caught.

Real-time chunking: GR00T's mainline ``Gr00tPolicy`` passes neither ``observation["action"]``
nor the options to its model, so by default both are ignored, as a stock server does. With
``rtc=True`` the server is one whose policy passes them on (Isaac-GR00T pull request #520's
policy layer, options forwarded) to N1.7's action head (``gr00t_n1d7.py``,
``get_action_with_features``), whose rules are kept: the four options ``action_horizon`` (A),
``rtc_overlap_steps`` (K), ``rtc_frozen_steps`` (F), ``rtc_ramp_rate`` (r) all required,
``0 <= F <= K <= A``; rows ``0..K-1`` start from the previous chunk's rows ``A-K..A-1``; the
update of row i is scaled by a strength, 0 for i < F, then ``1 - e^(-r t)`` normalised over
``t = linspace(0, 1, K - F + 2)[1:-1]``, 1 from K on. Its Euler loop is replaced by what it gives
for a velocity that points straight from where a row starts to the pattern:
``start + strength * (pattern - start)``, so frozen rows come back equal to the previous chunk.
GR00T says nothing of what it applied, and neither does this server.
"""

from __future__ import annotations

import io
import math
import threading
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
import zmq


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        buffer = io.BytesIO()
        np.save(buffer, obj, allow_pickle=False)
        return {"__ndarray_class__": True, "as_npy": buffer.getvalue()}
    raise TypeError(type(obj))


def _decode(obj: dict[Any, Any]) -> Any:
    if "__ndarray_class__" in obj:
        return np.load(io.BytesIO(obj["as_npy"]), allow_pickle=False)
    return obj


def to_bytes(obj: Any) -> bytes:
    return msgpack.packb(obj, default=_encode)  # type: ignore[no-any-return]


def from_bytes(data: bytes) -> Any:
    return msgpack.unpackb(data, object_hook=_decode)


def modality(keys: list[str], steps: int = 1) -> dict[str, Any]:
    """A ModalityConfig as GR00T sends it."""
    fields = {
        "delta_indices": list(range(steps)),
        "modality_keys": keys,
        "sin_cos_embedding_keys": None,
        "mean_std_embedding_keys": None,
        "action_configs": None,
    }
    return {"__ModalityConfig_class__": True, "as_json": fields}


def check_observation(observation: dict[str, Any], config: dict[str, Any]) -> None:
    """``Gr00tPolicy.check_observation``'s rules, as assertions."""
    for name in ("video", "state", "language"):
        assert isinstance(observation.get(name), dict), f"Observation must contain a '{name}' key"
    batch = -1
    for name, dtype in (("video", np.uint8), ("state", np.float32)):
        steps = len(config[name]["as_json"]["delta_indices"])
        for key in config[name]["as_json"]["modality_keys"]:
            assert key in observation[name], f"{name} key '{key}' must be in observation"
            value = observation[name][key]
            assert isinstance(value, np.ndarray), f"{name} key '{key}' must be a numpy array"
            assert value.dtype == dtype, f"{name} key '{key}' must be {dtype}. Got {value.dtype}"
            assert value.ndim == (5 if name == "video" else 3), f"{name} '{key}' bad shape"
            assert value.shape[1] == steps, f"{name} key '{key}''s horizon must be {steps}"
            if name == "video":
                assert value.shape[-1] == 3, f"Video key '{key}''s channel 'C' must be 3"
            assert batch in (-1, len(value)), f"{name} key '{key}' must have batch size {batch}"
            batch = len(value)
    for key in config["language"]["as_json"]["modality_keys"]:
        texts = observation["language"][key]
        assert isinstance(texts, list), f"Language key '{key}' must be a list"
        assert batch in (-1, len(texts)), f"Language key '{key}' must have batch size {batch}"
        for item in texts:
            assert isinstance(item, list) and len(item) == 1 and isinstance(item[0], str)


class Gr00tServer:
    """The server on 127.0.0.1 in a thread; `url` is its ``tcp://`` address.

    `action_dims` (action key -> dim, in config order) and `horizon` shape the actions;
    `state_keys`, `video_keys` and `language_key` the config. `api_token` requires a key.
    `reply` may replace the answer to ``get_action`` (given the decoded request), and
    `delay_s` holds every answer back that long (a silent server, to a client with a shorter
    deadline). `port` binds that port rather than a free one (a server restarted in place).
    """

    def __init__(
        self,
        *,
        video_keys: tuple[str, ...] = ("front", "wrist"),
        state_keys: tuple[str, ...] = ("arm", "gripper"),
        action_dims: dict[str, int] | None = None,
        horizon: int = 4,
        language_key: str = "annotation.human.task_description",
        video_steps: int = 1,
        api_token: str | None = None,
        reply: Callable[[dict[str, Any]], Any] | None = None,
        delay_s: float = 0.0,
        port: int | None = None,
        rtc: bool = False,
    ) -> None:
        self.action_dims = action_dims or {"arm": 6, "gripper": 1}
        self.horizon = horizon
        self.config = {
            "video": modality(list(video_keys), video_steps),
            "state": modality(list(state_keys)),
            "action": modality(list(self.action_dims), horizon),
            "language": modality([language_key]),
        }
        self.api_token = api_token
        self.reply = reply
        self.delay_s = delay_s
        self.rtc = rtc
        self.frames: list[bytes] = []
        self.endpoints: list[str] = []
        self.answered = threading.Semaphore(0)
        """Released once per reply sent (to a client still waiting or not)."""
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.REP)
        self._socket.setsockopt(zmq.LINGER, 0)
        if port is None:
            port = self._socket.bind_to_random_port("tcp://127.0.0.1")
        else:
            self._socket.bind(f"tcp://127.0.0.1:{port}")
        self.url = f"tcp://127.0.0.1:{port}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> Gr00tServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._context.term()

    def actions(self, observation: dict[str, Any]) -> dict[str, np.ndarray]:
        """The actions for `observation`, keys in reverse config order."""
        offset = sum(float(v.sum()) for v in observation["state"].values())
        out = {}
        for index, (key, dim) in reversed(list(enumerate(self.action_dims.items()))):
            t = np.arange(self.horizon)[:, None] * 10
            d = np.arange(dim)[None, :]
            out[key] = (100 * index + t + d + offset).astype(np.float32)[None]
        return out

    def continue_chunk(
        self, actions: dict[str, np.ndarray], previous: dict[str, Any], options: Any
    ) -> None:
        """`actions` continued from the `previous` chunk as N1.7's action head does (above)."""
        names = ("action_horizon", "rtc_overlap_steps", "rtc_frozen_steps", "rtc_ramp_rate")
        missing = sorted(set(names) - set(options or {}))
        assert not missing, f"Missing GR00T RTC options: {missing}"
        meant, overlap, frozen = (int(options[name]) for name in names[:3])
        rate = float(options["rtc_ramp_rate"])
        assert 0 <= frozen <= overlap <= meant <= self.horizon, "RTC needs 0 <= F <= K <= A"
        assert math.isfinite(rate) and rate > 0, f"rtc_ramp_rate must be positive, got {rate}"
        strength = np.ones(self.horizon)
        strength[:frozen] = 0.0
        t = np.linspace(0.0, 1.0, overlap - frozen + 2)
        ramp = 1 - np.exp(-rate * t)
        strength[frozen:overlap] = (ramp / ramp[-1])[1:-1]
        for key, dim in self.action_dims.items():
            chunk = previous[key]
            assert isinstance(chunk, np.ndarray) and chunk.dtype == np.float32
            assert chunk.shape == (1, self.horizon, dim), f"previous action {key!r}: {chunk.shape}"
            start = chunk[0, meant - overlap : meant]
            head = actions[key][0, :overlap]
            actions[key][0, :overlap] = start + strength[:overlap, None] * (head - start)

    def _answer(self, request: dict[str, Any]) -> Any:
        endpoint = request.get("endpoint", "get_action")
        self.endpoints.append(endpoint)
        data = request.get("data", {})
        if endpoint == "ping":
            return {"status": "ok", "message": "Server is running"}
        if endpoint == "kill":
            self._stop.set()
            return {}
        if endpoint == "get_modality_config":
            return self.config
        if endpoint == "reset":
            return {}
        if endpoint == "get_action":
            if self.reply is not None:
                return self.reply(request)
            check_observation(data["observation"], self.config)
            actions = self.actions(data["observation"])
            if self.rtc and "action" in data["observation"]:
                self.continue_chunk(actions, data["observation"]["action"], data["options"])
            return [actions, {}]
        raise ValueError(f"Unknown endpoint: {endpoint}")

    def stop(self) -> None:
        """Stop serving and close the socket, as a server that went away does."""
        self._stop.set()

    def _serve(self) -> None:
        try:
            self._serve_until_stopped()
        finally:
            self._socket.close(linger=0)

    def _serve_until_stopped(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        while not self._stop.is_set():
            if not poller.poll(50):
                continue
            frame = self._socket.recv()
            self.frames.append(frame)
            request = from_bytes(frame)
            if self.api_token is not None and request.get("api_token") != self.api_token:
                answer: Any = {"error": "Unauthorized: Invalid API token"}
            else:
                try:
                    answer = self._answer(request)
                except Exception as exc:
                    answer = {"error": str(exc)}
            if self._stop.wait(self.delay_s):
                return
            self._socket.send(answer if isinstance(answer, bytes) else to_bytes(answer))
            self.answered.release()

"""The client fits what the server announces, and refuses what does not fit before sending.

The server here requires Pi0.5's cameras, 64x80 frames and 8 state values; every request that
reaches it is counted at the ASGI layer, so "nothing was sent" is a count of zero.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import pytest

from vla_client import (
    ActionClient,
    AsyncActionClient,
    ContractError,
    Observation,
    ProtocolError,
    ServerError,
)
from vla_client.cameras.preprocess import resize_with_pad
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app

PI05 = ("base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb")
RNG = np.random.default_rng(12)


@dataclass
class Counted:
    """An ASGI app that counts the generation requests and websocket messages it is given."""

    app: Any
    posts: int = 0
    seen: list[dict[str, tuple[int, ...]]] = field(default_factory=list)

    @property
    def state(self) -> Any:
        return self.app.state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/v1/actions/generations":
            self.posts += 1
        if scope["type"] == "websocket":

            async def counting_receive() -> Any:
                message = await receive()
                self.posts += message["type"] == "websocket.receive"
                return message

            await self.app(scope, counting_receive, send)
            return
        await self.app(scope, receive, send)


class SeeingPolicy(ReferencePolicy):
    def __init__(self, seen: list[dict[str, tuple[int, ...]]], **options: Any) -> None:
        super().__init__(**options)
        self._seen = seen

    def infer(self, observation: Any) -> np.ndarray:
        self._seen.append({name: f.shape for name, f in observation.images.items()})
        return super().infer(observation)


def strict_app(**policy: Any) -> Counted:
    seen: list[dict[str, tuple[int, ...]]] = []
    options: dict[str, Any] = {
        "camera_names": PI05,
        "image_size": (64, 80),
        "image_size_required": True,
        "state_dim": 8,
        "camera_aliases": {"exterior": "base_0_rgb"},
        **policy,
    }
    counted = Counted(create_app(SeeingPolicy(seen, **options), ServerConfig(in_process=True)))
    counted.seen = seen
    return counted


@pytest.fixture(scope="module")
def strict() -> Iterator[tuple[LocalServer, Counted]]:
    counted = strict_app()
    with LocalServer(counted) as server:  # type: ignore[arg-type]
        yield server, counted


@pytest.fixture
def server(strict: tuple[LocalServer, Counted]) -> tuple[LocalServer, Counted]:
    strict[1].posts = 0
    strict[1].seen.clear()
    return strict


def frames(*names: str, shape: tuple[int, int] = (64, 80)) -> dict[str, np.ndarray]:
    return {name: RNG.integers(0, 256, (*shape, 3), dtype=np.uint8) for name in names}


def urls(server: LocalServer) -> list[str]:
    return [server.url, f"ws://127.0.0.1:{server.port}"]


FITTING = Observation(frames(*PI05), state=np.zeros(8), task="t")


def test_an_observation_that_fits_goes_through_on_every_transport(server) -> None:
    local, counted = server
    for url in urls(local):
        with ActionClient(url) as client:
            assert client.infer(FITTING).actions.shape == (16, 7)
    assert counted.posts == 2


@pytest.mark.parametrize(
    ("observation", "field", "said"),
    [
        (Observation(frames("wrist", "left_wrist_0_rgb", "right_wrist_0_rgb"), np.zeros(8)),
         "input.image_keys", "'wrist' matches none"),
        (Observation(frames("base_0_rgb", "left_wrist_0_rgb"), np.zeros(8)),
         "input.image_keys", "missing ['right_wrist_0_rgb']"),
        (Observation(frames(*PI05), np.zeros(7)), "input.state_dim", "has 7"),
        (Observation(frames(*PI05)), "input.state_dim", "has none"),
    ],
)  # fmt: skip
def test_a_mismatch_is_a_contract_error_and_nothing_is_sent(
    server, observation: Observation, field: str, said: str
) -> None:
    local, counted = server
    for url in urls(local):
        with ActionClient(url) as client, pytest.raises(ContractError) as caught:
            client.infer(observation)
        assert caught.value.field == field and said in str(caught.value)
    assert counted.posts == 0


def test_a_frame_of_another_size_is_refused_unless_resized(server) -> None:
    local, counted = server
    big = Observation(frames(*PI05, shape=(120, 160)), np.zeros(8))
    with ActionClient(local.url, resize="none") as client, pytest.raises(ContractError) as caught:
        client.infer(big)
    assert caught.value.field == "input.image_size" and caught.value.expected == [64, 80]
    assert counted.posts == 0
    with ActionClient(local.url) as client:  # auto: the server requires the size, so pad
        result = client.infer(big)
    assert counted.seen == [dict.fromkeys(PI05, (64, 80, 3))]
    assert result.timings.fit_ms > 0


def test_the_resize_is_openpis_resize_with_pad(server) -> None:
    local, _ = server
    big = Observation(frames(*PI05, shape=(90, 200)), np.zeros(8))
    with ActionClient(local.url, resize="pad") as client:
        result = client.infer(big, return_digest=True)
    for name, frame in big.images.items():
        padded = resize_with_pad(frame, 64, 80)
        assert result.digests[name]["shape"] == [64, 80, 3]  # type: ignore[index]
        want = hashlib.sha256(np.ascontiguousarray(padded).tobytes()).hexdigest()
        assert result.digests[name]["sha256"] == want  # type: ignore[index]


def test_a_camera_map_and_an_alias_make_the_same_observation_fit(server) -> None:
    local, counted = server
    robot = Observation(frames("exterior", "wrist_l", "wrist_r"), np.zeros(8))
    camera_map = {"wrist_l": "left_wrist_0_rgb", "wrist_r": "right_wrist_0_rgb"}
    for url in urls(local):
        with ActionClient(url, camera_map=camera_map) as client:
            client.infer(robot)
    assert counted.seen == [dict.fromkeys(PI05, (64, 80, 3))] * 2


def test_the_check_can_be_turned_off_and_the_server_still_refuses(server) -> None:
    local, counted = server
    wrong = Observation(frames("wrist", "left", "right"), np.zeros(8))
    with (
        ActionClient(local.url, check_contract=False) as client,
        pytest.raises(ServerError, match="400") as caught,
    ):
        client.infer(wrong)
    assert not isinstance(caught.value, ContractError)
    assert counted.posts == 1


def test_the_async_client_checks_alike(server) -> None:
    local, counted = server

    async def run(url: str) -> None:
        async with AsyncActionClient(url) as client:
            with pytest.raises(ContractError, match="state_dim"):
                await client.infer(Observation(frames(*PI05), np.zeros(3)))
            await client.infer(FITTING)

    for url in urls(local):
        asyncio.run(run(url))
    assert counted.posts == 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_reconnect_to_a_server_with_other_metadata_is_checked_afresh() -> None:
    """A websocket reads the metadata of every new connection before sending on it. HTTP hides
    its connections: the first request to the new server is refused by the server itself (its
    400), after which the client reads the metadata again and checks."""
    port = free_port()
    pi05 = Observation(frames(*PI05), np.zeros(8))
    for url, refused_by_server in ((f"http://127.0.0.1:{port}", 1), (f"ws://127.0.0.1:{port}", 0)):
        with LocalServer(strict_app(), port=port):  # type: ignore[arg-type]
            client = ActionClient(url)
            client.infer(pi05)
        other = strict_app(camera_names=("top", "side"), camera_aliases={})
        with LocalServer(other, port=port), client:  # type: ignore[arg-type]
            if refused_by_server:
                with pytest.raises(ServerError, match="400"):
                    client.infer(pi05)
            with pytest.raises(ContractError, match=r"\['top', 'side'\]"):
                client.infer(pi05)
            client.infer(Observation(frames("top", "side"), np.zeros(8)))
        assert other.posts == 1 + refused_by_server, url


def test_servers_that_announce_nothing_are_not_checked() -> None:
    from fastapi import FastAPI

    app = FastAPI()
    calls: list[int] = []

    @app.post("/v1/actions/generations")
    def generations(request: dict[str, Any]) -> dict[str, object]:
        calls.append(1)
        return {"request_id": request["request_id"], "actions": [[0.0, 1.0]]}

    with LocalServer(app) as local, ActionClient(local.url) as client:
        assert client.infer(Observation(frames("anything"))).actions.shape == (1, 2)
    assert calls == [1]


def test_malformed_metadata_is_a_typed_error_that_says_so() -> None:
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/v1/actions/metadata")
    def metadata() -> object:
        return {"input": {"image_keys": "base_0_rgb"}}

    with LocalServer(app) as local, ActionClient(local.url) as client:
        assert httpx.get(f"{local.url}/v1/actions/metadata").status_code == 200
        with pytest.raises(ProtocolError, match="image_keys must be a list"):
            client.infer(Observation(frames("a")))


def test_bad_fit_options_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="sends both 'a' and 'b' to 'x'"):
        ActionClient("http://127.0.0.1:1", camera_map={"a": "x", "b": "x"})
    with pytest.raises(ValueError, match="under 8 pixels"):
        ActionClient("http://127.0.0.1:1", image_size=(4, 64))
    with pytest.raises(ValueError, match="'auto', 'pad', 'crop', 'none'"):
        ActionClient("http://127.0.0.1:1", resize="stretch")  # type: ignore[arg-type]

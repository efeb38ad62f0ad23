"""A reply whose action array is empty is a `ProtocolError`, never an empty chunk to execute.

An empty chunk (no steps, or steps of no dims) from a broken server would give a control loop
nothing to do and no error to show; the client refuses it in every reply form and over every
transport. Checked on `read_actions` and through real servers that send such replies: a small
Starlette app over HTTP, a scripted websocket server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from scripted_server import Script, ScriptedServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from vla_client.client import ActionClient
from vla_client.errors import ProtocolError
from vla_client.observation import Observation
from vla_client.protocol import GENERATIONS_PATH, read_actions
from vla_client.server import LocalServer

EMPTY = {
    "no steps": np.zeros((0, 7), np.float32),
    "no dims": np.zeros((5, 0), np.float32),
    "no batch": np.zeros((0, 5, 7), np.float32),
    "batch of empty": np.zeros((2, 0, 7), np.float32),
    "flat empty": np.zeros((0,), np.float32),
}


def envelope(actions: Any) -> dict[str, Any]:
    return {"id": "r", "object": "action.generation",
            "data": [{"index": 0, "action": {"values": actions}}]}  # fmt: skip


@pytest.mark.parametrize("form", ["raw", "envelope"])
@pytest.mark.parametrize("as_list", [False, True], ids=["ndarray", "list"])
@pytest.mark.parametrize("name", sorted(EMPTY))
def test_read_actions_refuses_an_empty_action_array(name: str, as_list: bool, form: str) -> None:
    actions: Any = EMPTY[name].tolist() if as_list else EMPTY[name]
    reply = {"request_id": "r", "actions": actions} if form == "raw" else envelope(actions)
    with pytest.raises(ProtocolError, match=r"actions must be|no data"):
        read_actions(reply)


def test_read_actions_takes_the_smallest_chunk() -> None:
    """One step of one dim is the smallest real chunk: read, not refused."""
    for reply in ({"actions": [[0.5]]}, envelope([[0.5]])):
        actions, _ = read_actions(reply)
        assert actions.shape == (1, 1) and actions[0, 0] == 0.5


@pytest.fixture
def empty_http_server() -> Iterator[LocalServer]:
    async def generations(request: Request) -> JSONResponse:
        return JSONResponse({"request_id": None, "actions": [[]]})

    app = Starlette(routes=[Route(GENERATIONS_PATH, generations, methods=["POST"])])
    with LocalServer(app) as server:  # type: ignore[arg-type]
        yield server


def test_an_http_reply_with_an_empty_chunk_is_a_protocol_error(
    empty_http_server: LocalServer, small_observation: Observation
) -> None:
    with (
        ActionClient(empty_http_server.url, check_contract=False) as client,
        pytest.raises(ProtocolError, match=r"actions must be .* got shape \(1, 0\)"),
    ):
        client.infer(small_observation)


@pytest.mark.parametrize("name", ["no steps", "no dims"])
def test_a_websocket_reply_with_an_empty_chunk_is_a_protocol_error(
    name: str, scripted: Callable[[Script], ScriptedServer], small_observation: Observation
) -> None:
    def script(index: int, request: dict[str, Any]) -> tuple[float, list[Any]]:
        return 0.0, [{"id": request["request_id"], "data": [{"action": {"values": EMPTY[name]}}]}]

    server = scripted(script)
    with (
        ActionClient(server.url, check_contract=False) as client,
        pytest.raises(ProtocolError, match="actions must be"),
    ):
        client.infer(small_observation)
    assert len(server.requests) == 1

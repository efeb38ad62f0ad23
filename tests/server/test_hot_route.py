"""POST /v1/actions/generations is served by a plain Starlette app and documented by FastAPI."""

import asyncio

import httpx
import numpy as np
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oracles import oracle_actions
from vla_client import encode_request
from vla_client.errors import InferenceError, VLAClientError
from vla_client.protocol import GENERATIONS_PATH, METADATA_PATH, loads, read_actions
from vla_client.server import (
    LocalServer,
    PolicyInput,
    ReferencePolicy,
    ServerConfig,
    create_app,
)


def test_the_hot_route_is_plain_starlette_and_the_documented_one_stays():
    app = create_app(ReferencePolicy(), ServerConfig(in_process=True))
    assert isinstance(app.hot_route, Starlette) and not isinstance(app.hot_route, FastAPI)
    app.middleware_stack = app.build_middleware_stack()  # as the first request does
    (route,) = app.hot_route.routes
    assert type(route) is Route and route.path == GENERATIONS_PATH and route.methods == {"POST"}
    assert app.hot_route.exception_handlers == app.exception_handlers
    assert app.exception_handlers.keys() >= {Exception, VLAClientError, HTTPException}
    assert issubclass(InferenceError, VLAClientError)
    matching = [r for r in app.router.routes if getattr(r, "path", "") == GENERATIONS_PATH]
    assert [type(route) for route in matching] == [APIRoute]
    operation = app.openapi()["paths"][GENERATIONS_PATH]["post"]
    assert {"application/json", "application/msgpack"} <= set(operation["requestBody"]["content"])


def test_the_plain_route_serves_arrays_and_errors(server_url, observation):
    body, content_type = encode_request(observation, encoding="raw", wire="msgpack")
    with httpx.Client(base_url=server_url, timeout=30) as http:
        reply = http.post(GENERATIONS_PATH, content=body, headers={"content-type": content_type})
        assert reply.status_code == 200
        actions, _ = read_actions(loads(reply.content, "msgpack"))
        expected = oracle_actions(
            PolicyInput(dict(observation.images), observation.state, observation.task),
            horizon=10,
            action_dim=7,
        )
        np.testing.assert_allclose(actions, expected, rtol=1e-6)
        refused = http.post(GENERATIONS_PATH, content=b"x", headers={"content-type": "image/png"})
        assert refused.status_code == 415 and "content type" in refused.json()["detail"]
        headers = {"content-type": content_type}
        broken = http.post(GENERATIONS_PATH, content=body[:-5], headers=headers)
        assert broken.status_code == 400 and "msgpack" in broken.json()["detail"]
        assert http.get(GENERATIONS_PATH).status_code == 405


class Tagging:
    """A user's middleware: stamps every reply, and notes the paths it saw."""

    def __init__(self, app: ASGIApp, seen: list[str]) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seen.append(scope["path"])

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-tagged", b"yes")]
            await send(message)

        await self.app(scope, receive, stamped)


def test_middleware_and_handlers_the_user_adds_run_on_the_hot_route_too(observation):
    """A server engineer's ``add_middleware`` (tracing, CORS) and ``add_exception_handler``
    see every request, the generations path included, not every path but the hottest."""
    seen: list[str] = []
    app = create_app(
        ReferencePolicy(action_horizon=4, action_dim=3),
        ServerConfig(in_process=True, api_key="s3cret"),
    )
    app.add_middleware(Tagging, seen=seen)

    async def teapot(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": "teapot"}, status_code=418)

    app.add_exception_handler(LookupError, teapot)
    body, content_type = encode_request(observation, encoding="raw", wire="msgpack")
    headers = {"content-type": content_type, "authorization": "Bearer s3cret"}
    with LocalServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        served = http.post(GENERATIONS_PATH, content=body, headers=headers)
        assert served.status_code == 200 and served.headers["x-tagged"] == "yes"
        refused = http.post(GENERATIONS_PATH, content=body, headers={"content-type": content_type})
        assert refused.status_code == 401 and refused.headers["x-tagged"] == "yes"
        assert http.get(METADATA_PATH, headers=headers).headers["x-tagged"] == "yes"
    assert seen == [GENERATIONS_PATH, GENERATIONS_PATH, METADATA_PATH]
    assert app.hot_route is not None and app.hot_route.exception_handlers[LookupError] is teapot


def test_middleware_added_after_the_first_generations_request_is_refused():
    """Both stacks are built by the first request, on whichever path, lifespan or not (an
    ASGI server may run none): a middleware added later would miss requests already served, so
    Starlette's rule refuses it for the hot route too."""
    app = create_app(ReferencePolicy(action_horizon=4, action_dim=3), ServerConfig(in_process=True))

    async def first_request() -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            reply = await http.post(GENERATIONS_PATH, content=b"x",
                                    headers={"content-type": "image/png"})  # fmt: skip
            return reply.status_code

    assert asyncio.run(first_request()) == 415
    with pytest.raises(RuntimeError, match="after an application has started"):
        app.add_middleware(Tagging, seen=[])

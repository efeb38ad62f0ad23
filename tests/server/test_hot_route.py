"""POST /v1/actions/generations is served by a plain Starlette app and documented by FastAPI."""

import httpx
import numpy as np
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import Route

from oracles import oracle_actions
from vla_client import encode_request
from vla_client.errors import InferenceError, VLAClientError
from vla_client.protocol import GENERATIONS_PATH, loads, read_actions
from vla_client.server import PolicyInput, ReferencePolicy, ServerConfig, create_app


def test_the_hot_route_is_plain_starlette_and_the_documented_one_stays():
    app = create_app(ReferencePolicy(), ServerConfig(in_process=True))
    assert isinstance(app.hot_route, Starlette) and not isinstance(app.hot_route, FastAPI)
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

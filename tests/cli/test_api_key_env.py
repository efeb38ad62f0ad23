"""The API key from ``VLA_CLIENT_API_KEY``, for the Python clients and every CLI command that
talks to a server (explicit key first); a 401 says how to give the key, over HTTP and over the
websocket alike (issue 34 item 4)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import numpy as np
import pytest

from vla_client import ActionClient, AsyncActionClient, Observation, ServerError
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app

KEY = "s3cret-key-for-tests"


@pytest.fixture(scope="module")
def keyed_url() -> Iterator[str]:
    app = create_app(ReferencePolicy(action_horizon=4, action_dim=3), ServerConfig(api_key=KEY))
    with LocalServer(app) as server:
        yield server.url


def small_observation() -> Observation:
    return Observation({"wrist": np.zeros((16, 16, 3), np.uint8)})


@pytest.mark.parametrize("scheme", ["http", "ws"])
def test_the_python_client_reads_the_key_from_the_environment(monkeypatch, keyed_url, scheme):
    url = scheme + keyed_url.removeprefix("http")
    monkeypatch.setenv("VLA_CLIENT_API_KEY", f" {KEY}\n")  # stripped, as the server strips it
    with ActionClient(url) as client:
        assert client.infer(small_observation()).actions.shape == (4, 3)

    async def once() -> tuple[int, ...]:
        async with AsyncActionClient(url) as client:
            return (await client.infer(small_observation())).actions.shape

    assert asyncio.run(once()) == (4, 3)


def test_an_explicit_key_comes_first(monkeypatch, keyed_url):
    monkeypatch.setenv("VLA_CLIENT_API_KEY", KEY)
    with ActionClient(keyed_url, api_key="wrong") as client, pytest.raises(ServerError) as caught:
        client.infer(small_observation())
    assert caught.value.status_code == 401


def test_an_empty_variable_is_refused_not_read_as_no_key(monkeypatch, keyed_url, cli, usage_error):
    monkeypatch.setenv("VLA_CLIENT_API_KEY", " ")
    with pytest.raises(ValueError, match="VLA_CLIENT_API_KEY is set but empty"):
        ActionClient(keyed_url)
    assert "VLA_CLIENT_API_KEY is set but empty" in usage_error(cli("send", keyed_url))


@pytest.mark.parametrize("scheme", ["http", "ws"])
def test_a_401_names_the_option_and_the_variable(monkeypatch, keyed_url, cli, error_line, scheme):
    """Over the websocket the refusal reads as a sentence, as over HTTP, not as raw JSON."""
    monkeypatch.delenv("VLA_CLIENT_API_KEY", raising=False)
    url = scheme + keyed_url.removeprefix("http")
    line = error_line(cli("send", url, "--height", "16", "--width", "16").err)
    assert "server answered 401: missing or invalid API key; " in line, line
    assert "--api-key" in line and "VLA_CLIENT_API_KEY" in line
    assert "{" not in line


@pytest.mark.parametrize(
    "command",
    [
        ("send", "--height", "16", "--width", "16", "--json"),
        ("metadata",),
        ("bench", "--repeat", "1", "--warmup", "0", "--encodings", "png", "--transports", "http",
         "--height", "16", "--width", "16"),
    ],
)  # fmt: skip
def test_every_command_reads_the_variable(monkeypatch, keyed_url, cli, command):
    monkeypatch.setenv("VLA_CLIENT_API_KEY", KEY)
    run = cli(command[0], keyed_url, *command[1:])
    assert run.code == 0, run.err
    if command[0] == "metadata":
        assert json.loads(run.out)["output"]["action_horizon"] == 4


def test_one_variable_names_the_key_for_client_server_and_their_advice() -> None:
    """The client, ``vla-client serve`` and the 401 advice all read one constant (issue 37),
    defined where both ends may import it: the server never imports the client."""
    from vla_client.cli import serve
    from vla_client.client import addressing
    from vla_client.errors import KEY_ADVICE
    from vla_client.protocol.endpoints import API_KEY_ENV

    assert API_KEY_ENV == "VLA_CLIENT_API_KEY"
    assert addressing.API_KEY_ENV is API_KEY_ENV and serve.API_KEY_ENV is API_KEY_ENV
    assert API_KEY_ENV in KEY_ADVICE

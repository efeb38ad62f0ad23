"""Connection errors name the URL tried and the fix (issue 34 item 5): a refused port, TLS
spoken to a plain server, a URL copied with a route on its end, a read that timed out."""

from __future__ import annotations

import socket

import pytest

from vla_client import ActionClient


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("scheme", ["http", "ws"])
def test_a_refused_connection_names_the_url_and_port(cli, error_line, scheme):
    port = closed_port()
    # no wait for a server starting there (tests/cli/test_quickstart.py tests the wait)
    line = error_line(cli("send", f"{scheme}://127.0.0.1:{port}", "--wait-for-server", "0").err)
    assert f"cannot reach the server at {scheme}://127.0.0.1:{port}" in line, line
    assert f"nothing listens on port {port} of 127.0.0.1" in line
    assert f"'vla-client serve --port {port}'" in line


def test_https_to_a_plain_server_says_to_use_http(cli, error_line, server_url):
    tls = server_url.replace("http://", "https://")
    line = error_line(cli("send", tls, "--height", "16", "--width", "16").err)
    assert line == (
        f"vla-client: error: {tls}: the server speaks plain HTTP, not TLS; use {server_url}"
    )


@pytest.mark.parametrize("route", ["/v1/actions/generations", "/v1/actions/metadata/", "/health"])
def test_a_url_ending_in_a_route_is_refused_with_the_base_url(cli, usage_error, route):
    line = usage_error(cli("send", f"http://127.0.0.1:8000{route}"))
    assert f"ends in the server's route {route.rstrip('/')}" in line
    assert "give the server's base URL, http://127.0.0.1:8000 (" in line
    with pytest.raises(ValueError, match=r"give the server's base URL, http://127\.0\.0\.1:8000$"):
        ActionClient(f"http://127.0.0.1:8000{route}")


def test_a_base_url_under_a_prefix_keeps_its_prefix():
    with pytest.raises(ValueError, match=r"base URL, https://h\.example/robots/7$"):
        ActionClient("https://h.example/robots/7/v1/actions/generations")
    ActionClient("http://h.example/robots/7").close()  # a prefix alone is a base URL


def test_a_read_timeout_says_the_seconds_and_the_option(cli, error_line, slow_server_url):
    line = error_line(cli("send", slow_server_url, "--timeout", "0.5", "--no-check").err)
    assert f"no reply from {slow_server_url} within 0.5 s" in line, line
    assert "--timeout" in line

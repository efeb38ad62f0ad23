"""`LocalServer` runs inside another program and leaves its logging alone."""

from __future__ import annotations

import logging

import httpx
import pytest

from vla_client.server import LocalServer, ReferencePolicy, create_app


def test_a_local_server_installs_no_handlers_and_its_warnings_reach_the_root_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """uvicorn's default logging config puts a StreamHandler on the stream of the moment: in a
    test whose stderr was captured, a later warning then failed with 'I/O operation on closed
    file' and printed a traceback into another command's one-line error."""
    uvicorn_logger = logging.getLogger("uvicorn")
    before = list(uvicorn_logger.handlers), uvicorn_logger.propagate
    with LocalServer(create_app(ReferencePolicy(action_horizon=2, action_dim=2))) as server:
        assert (list(uvicorn_logger.handlers), uvicorn_logger.propagate) == before
        with caplog.at_level(logging.WARNING), pytest.raises(httpx.HTTPError):
            # TLS to a plain HTTP server: uvicorn warns of an invalid request
            httpx.get(server.url.replace("http://", "https://"), timeout=5)
        # the warning is logged from the server's thread; it reaches root once handled
        assert any(record.name == "uvicorn.error" for record in caplog.records)

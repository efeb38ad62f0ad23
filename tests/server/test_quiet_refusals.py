"""Refused requests cannot flood the log: no ERROR lines, one rate-limited INFO line."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app
from vla_client.server.edge.quiet_logs import RateLimitedLog


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def logged() -> Iterator[Records]:
    """Every record of uvicorn's error log and of the server's auth log, as they are emitted.

    Enter it once the server runs: uvicorn's logging set-up removes handlers added before.
    """
    handler = Records()
    loggers = [logging.getLogger("uvicorn.error"), logging.getLogger("vla_client.server.auth")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    yield handler
    for logger, level in zip(loggers, levels, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_refused_handshakes_log_no_error_and_one_line() -> None:
    app = create_app(ReferencePolicy(), ServerConfig(in_process=True, api_key="right"))
    with LocalServer(app) as server, logged() as records:
        for path in ("/openpi/policy", "/v1/actions/realtime", "/") * 7:
            with pytest.raises(InvalidStatus) as refused:
                connect(f"ws://127.0.0.1:{server.port}{path}", open_timeout=5).close()
            assert refused.value.response.status_code == 401
        assert httpx.get(f"{server.url}/v1/actions/metadata").status_code == 401
    errors = [r.getMessage() for r in records.records if r.levelno >= logging.ERROR]
    assert errors == []
    refusals = [r.getMessage() for r in records.records if r.name == "vla_client.server.auth"]
    assert len(refusals) == 1 and "no valid API key" in refusals[0]


def test_the_rate_limited_log_counts_what_it_held_back() -> None:
    now = [0.0]
    handler = Records()
    logger = logging.getLogger("test.rate_limited")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    log = RateLimitedLog(logger, interval_s=10.0, clock=lambda: now[0])
    for step in range(25):
        now[0] = step
        log.info("refused")
    messages = [r.getMessage() for r in handler.records]
    assert messages == [
        "refused",
        "refused (and 9 more since the last line)",
        "refused (and 9 more since the last line)",
    ]

"""A policy that raises leaves its traceback in the server log: the policy's own file and line,
with the request id, once per distinct failure (the worker formats it in its own process), and
repeats are counted instead of printed."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator

import httpx
import my_policies
import numpy as np
import pytest
from my_policies import Misbehaving

from vla_client import Observation, encode_request
from vla_client.server import LocalServer, ServerConfig, create_app
from vla_client.server.engine.failure_log import FailureLog

GENERATIONS = "/v1/actions/generations"
RAISE_LINE = next(
    number
    for number, line in enumerate(inspect.getsource(my_policies).splitlines(), start=1)
    if 'raise RuntimeError("secret at /opt/weights")' in line
)


@pytest.fixture(scope="module", params=["worker", "in_process"])
def failing(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    config = ServerConfig(in_process=request.param == "in_process")
    with LocalServer(create_app(Misbehaving(), config)) as server:
        yield server


def _post(server: LocalServer, task: str, request_id: str) -> httpx.Response:
    observation = Observation({"cam": np.zeros((8, 8, 3), np.uint8)}, task=task)
    body, content_type = encode_request(observation, request_id=request_id)
    return httpx.post(
        server.url + GENERATIONS, content=body, headers={"Content-Type": content_type}, timeout=30
    )


def test_the_policys_traceback_reaches_the_log_once_with_the_request_id(
    failing: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="vla_client.server"):
        replies = [_post(failing, "raise", f"req-fail-{n}") for n in range(50)]
    assert {reply.status_code for reply in replies} == {500}
    assert "/opt/weights" not in replies[0].text  # the client is told the type only
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("vla_client.server")]
    tracebacks = [m for m in messages if "Traceback (most recent call last)" in m]
    assert len(tracebacks) == 1, messages
    (logged,) = tracebacks
    assert "req-fail-0" in logged
    assert f'my_policies.py", line {RAISE_LINE}, in infer' in logged
    assert "RuntimeError: secret at /opt/weights" in logged
    assert len(messages) < 5, messages  # no line per repeat either


def test_a_different_failure_gets_its_own_traceback(
    failing: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    _post(failing, "raise", "req-first")
    with caplog.at_level(logging.INFO, logger="vla_client.server"):
        reply = _post(failing, "nan", "req-nan")  # a chunk refused by the server's check
    assert reply.status_code == 500
    assert any("req-nan" in r.getMessage() for r in caplog.records)


def test_repeats_are_counted_in_a_summary_at_most_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    logger = logging.getLogger("test.failures")
    failures = FailureLog(logger, summary_interval_s=10, clock=lambda: now[0])
    text = 'Traceback (most recent call last):\n  File "p.py", line 3, in infer\nValueError: x=1\n'
    with caplog.at_level(logging.ERROR, logger="test.failures"):
        failures.record("policy failed (ValueError)", "r0", text)
        for n in range(1, 6):
            now[0] = n
            failures.record("policy failed (ValueError)", f"r{n}", text.replace("x=1", f"x={n}"))
        now[0] = 12.0
        failures.record("policy failed (ValueError)", "r6", text)
        failures.record("policy failed (TypeError)", "r7", text.replace("ValueError", "TypeError"))
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3, messages
    assert messages[0].startswith("policy failed (ValueError) (request r0)\nTraceback")
    assert messages[1] == (
        "policy failed (ValueError) (request r6): the same failure 6 more times in the last "
        "12 s, 6 since its traceback was logged for request r0"
    )
    assert "request r7" in messages[2] and "TypeError: x=1" in messages[2]

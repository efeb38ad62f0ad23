"""No log line carries a credential: query-string keys and Authorization values are redacted.

A key sent in the query string is refused, but uvicorn's access log (and its websocket lines)
write the whole target; the server's log filter rewrites them, and any line of its own.
"""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path

import httpx
import pytest
from serve_process import start_serve
from uvicorn.logging import AccessFormatter
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from vla_client.server.edge.quiet_logs import _REDACTION, redact, redact_credentials_in_logs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import load_test

KEY = "the-real-k3y-for-redaction"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("GET /m?api_key=S1&x=1 HTTP/1.1", "GET /m?api_key=[redacted]&x=1 HTTP/1.1"),
        ("/ws?token=S2;key=S3", "/ws?token=[redacted];key=[redacted]"),
        ("/p?apikey=S4&api-key=S5", "/p?apikey=[redacted]&api-key=[redacted]"),
        ("/p?access_token=S6", "/p?access_token=[redacted]"),
        ("Authorization: Bearer S7", "Authorization: Bearer [redacted]"),
        ("authorization: api-key S8", "authorization: api-key [redacted]"),
        ("[(b'authorization', b'Basic S9')]", "[(b'authorization', b'Basic [redacted]')]"),
        ("{'authorization': 'S10'}", "{'authorization': '[redacted]'}"),
        ("monkey=banana&turkey=gravy", "monkey=banana&turkey=gravy"),
        ("GET /v1/actions/metadata HTTP/1.1", "GET /v1/actions/metadata HTTP/1.1"),
    ],
)  # fmt: skip
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_an_access_line_keeps_its_arguments_and_loses_the_key() -> None:
    """uvicorn's access formatter unpacks the record's arguments: they stay five, redacted."""
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/m?api_key=S1", "1.1", 401), None,
    )  # fmt: skip
    assert _REDACTION.filter(record)
    line = AccessFormatter("%(client_addr)s %(request_line)s %(status_code)s").format(record)
    assert line == "127.0.0.1:5 GET /m?api_key=[redacted] HTTP/1.1 401 Unauthorized"


def test_a_logged_traceback_is_redacted() -> None:
    try:
        raise RuntimeError("fetching http://h/x?token=S11 failed")
    except RuntimeError:
        record = logging.LogRecord(
            "vla_client.server", logging.ERROR, __file__, 1, "failed", None, sys.exc_info()
        )
    _REDACTION.filter(record)
    text = logging.Formatter().format(record)
    assert "S11" not in text and "token=[redacted]" in text


def test_every_logger_of_the_server_redacts() -> None:
    import vla_client.server.app  # noqa: F401  (what a running server has imported)

    redact_credentials_in_logs()
    names = ["uvicorn.error", "uvicorn.access", "vla_client.server", "vla_client.server.auth",
             "vla_client.server.worker", "vla_client.server.recorder"]  # fmt: skip
    assert [n for n in names if _REDACTION not in logging.getLogger(n).filters] == []


def test_serve_logs_no_credential(tmp_path: Path) -> None:
    """A real ``vla-client serve`` with a key and its access log: keys in query strings (refused)
    and the right key in the header leave no trace in anything it wrote."""
    secrets = ["qs-s3cret-1", "qs-s3cret-2", "qs-s3cret-3", "qs-s3cret-4"]
    port = load_test.free_port()
    access_log = (tmp_path / "stdout").open("wb")
    server = start_serve(port, "--api-key", KEY, stdout=access_log)
    url = f"http://127.0.0.1:{port}"
    try:
        refused = [
            httpx.get(f"{url}/v1/actions/metadata?api_key={secrets[0]}", timeout=10).status_code,
            httpx.get(f"{url}/v1/actions/metadata?key={secrets[1]}&x=1", timeout=10).status_code,
        ]
        headers = {"Authorization": f"Bearer {KEY}"}
        served = httpx.get(f"{url}/v1/actions/metadata?token={secrets[2]}", headers=headers)
        with pytest.raises(InvalidStatus):
            connect(f"ws://127.0.0.1:{port}/v1/actions/realtime?api_key={secrets[3]}").close()
        with connect(
            f"ws://127.0.0.1:{port}/v1/actions/realtime?api_key={secrets[3]}",
            additional_headers=headers,
        ):
            pass
    finally:
        server.send_signal(signal.SIGTERM)
        _, errors = server.communicate(timeout=30)
        access_log.close()
    log = errors.decode() + (tmp_path / "stdout").read_text()
    assert refused == [401, 401] and served.status_code == 200
    assert "/v1/actions/metadata?api_key=[redacted]" in log, log  # the access log, redacted
    assert "realtime?api_key=[redacted]" in log, log
    leaked = [secret for secret in [*secrets, KEY] if secret in log]
    assert leaked == [], log

"""`RawHTTPServer`: a TCP server on 127.0.0.1 whose replies are bytes a test writes by hand.

It lets the tests play servers no framework would be: one that drips its reply a byte a
second, one that streams a chunked reply forever, one that redirects. Each connection is
served in its own daemon thread by `answer(request, connection)`, which gets the request's
head and body and writes whatever it likes.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RawRequest:
    """One request as it arrived: the request line and headers (lower-cased names), the body."""

    line: str
    headers: dict[str, str]
    body: bytes


Answer = Callable[[RawRequest, socket.socket], None]


class RawHTTPServer:
    """Serves every request on a connection with `answer` until the client goes away."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[RawRequest] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.closed = threading.Event()
        """Set by `close`: an answer that writes forever stops when it sees it."""
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.closed.set()
        self._listener.close()

    def __enter__(self) -> RawHTTPServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                while not self.closed.is_set():
                    request = _read_request(conn)
                    if request is None:
                        return
                    self.requests.append(request)
                    self.answer(request, conn)
            except OSError:  # the client hung up on a reply it would not wait for
                return


def _read_request(conn: socket.socket) -> RawRequest | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    line, *fields = head.decode("latin-1").split("\r\n")
    headers = {}
    for item in fields:
        name, _, value = item.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return RawRequest(line, headers, body)

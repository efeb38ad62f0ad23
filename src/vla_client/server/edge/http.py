"""The HTTP edge of the server: bytes in, the pipeline, bytes out, failures as statuses.

``POST /v1/actions/generations`` reads the body (bounded in size and time; a msgpack body goes
straight into memory the runner lends, so arrays decoded from it reach the policy without a
copy), hands it to the `Pipeline` and answers in the format the client asked for: msgpack when
the request or its ``Accept`` says so, JSON otherwise. Every failure becomes a JSON
``{"detail": ...}`` with its status (and ``Retry-After`` for a 503 that will pass); nothing a
client sends can make the server send a traceback.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from vla_client.protocol import CONTENT_TYPES, Wire, dumps, wants_msgpack
from vla_client.server.edge.limits import read_body
from vla_client.server.engine.inference import RequestMemory
from vla_client.server.engine.pipeline import Pipeline, failure
from vla_client.server.engine.startup import Startup

Endpoint = Callable[[Request], Awaitable[Response]]


def generations_endpoint(pipeline: Pipeline) -> Endpoint:
    """The POST /v1/actions/generations handler for `pipeline`."""
    config = pipeline.config

    async def generations(request: Request) -> Response:
        started = time.perf_counter()
        content_type = request.headers.get("content-type")
        memory = pipeline.runner.lend_memory() if wants_msgpack(content_type, None) else None
        try:
            return await respond(request, content_type, memory, started)
        finally:
            if memory is not None:
                memory.release()

    async def respond(
        request: Request, content_type: str | None, memory: RequestMemory | None, started: float
    ) -> Response:
        # A frame of its own, so the body and the arrays that view it are gone by the time
        # `generations` gives the memory back.
        body = await read_body(
            request,
            config.max_body_bytes,
            config.body_timeout_s,
            into=memory.reserve if memory is not None else None,
        )
        decoded = await pipeline.decode(body, content_type)
        request.state.request_id = decoded.request_id
        reply = await pipeline.answer(decoded, form="asked", started=started, memory=memory)
        wire: Wire = (
            "msgpack" if wants_msgpack(content_type, request.headers.get("accept")) else "json"
        )
        return Response(dumps(reply, wire), media_type=CONTENT_TYPES[wire])

    return generations


def failure_handler(pipeline: Pipeline) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
    """The exception handler for every failure a request can meet past the HTTP layer (500s
    are logged in `pipeline`'s failure log)."""

    async def failure_response(request: Request, exc: Exception) -> JSONResponse:
        status = failure(
            exc,
            getattr(request.state, "request_id", None),
            pipeline.failures,
            send_policy_errors=pipeline.config.send_policy_errors,
        )
        headers = None if status.retry_after is None else {"Retry-After": f"{status.retry_after:g}"}
        return JSONResponse({"detail": status.detail}, status.status, headers=headers)

    return failure_response


def health_endpoint(startup: Startup) -> Callable[[], JSONResponse]:
    """GET /health: ``{"status": "ok"}`` once the policy is ready; 503 with ``"loading"``
    before, ``"failed"`` if it could not start (the reason is in the server log)."""

    def health() -> JSONResponse:
        if startup.state == "ready":
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": startup.state}, 503)

    return health

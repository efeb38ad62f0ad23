"""The reference action server: SGLang's action API on FastAPI.

The entrypoint's job, in order: bound the body, decode every image to an array (the shared
codecs; in a worker thread when the images are encoded), check the request against the policy,
hand an arrays-only `PolicyInput` to the runner, and answer in the format the client asked for.
Every bad input is a 4xx with a JSON ``detail``; nothing a client sends can take the server down
or make it send a traceback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from vla_client.errors import (
    CodecError,
    InferenceError,
    PayloadTooLargeError,
    UnsupportedContentTypeError,
)
from vla_client.protocol import (
    CONTENT_TYPES,
    DecodedRequest,
    Wire,
    decode_payload,
    decode_request,
    dumps,
    loads,
    new_request_id,
    wants_msgpack,
    wire_for_content_type,
)
from vla_client.server.auth import APIKeyMiddleware
from vla_client.server.config import ServerConfig
from vla_client.server.inference import RequestMemory, Runner, ThreadRunner
from vla_client.server.limits import read_body
from vla_client.server.memory import keep_freed_memory
from vla_client.server.openapi import generations_openapi
from vla_client.server.policy import Policy, metadata_document
from vla_client.server.steps import infer_with_timeout, policy_input, reply_document
from vla_client.server.websocket import register_websocket_routes
from vla_client.server.worker import WorkerRunner

log = logging.getLogger("vla_client.server")

_ENCODED_IMAGE_MIN_BYTES = 1024  # smaller images decode in microseconds, inline is fine
_MAX_SEARCH_DEPTH = 6  # deeper documents go to a thread rather than being searched
GENERATIONS_PATH = "/v1/actions/generations"


class ActionServerApp(FastAPI):
    """FastAPI, except that ``POST /v1/actions/generations`` goes straight to `hot_route`.

    Every robot request takes that path, and FastAPI's own middleware (telemetry, body limit,
    the exit stack its routes need) cost the entrypoint 4-8% of its throughput at 16 clients,
    measured against the same endpoint in plain Starlette. `hot_route` is a plain Starlette app
    with the same exception handlers and API-key check; the FastAPI route for the path stays,
    to document it in OpenAPI and to serve it if a request reaches it another way. Middleware
    added to the app later (CORS, say) does not see that path unless added to `hot_route` too.
    """

    hot_route: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self.hot_route is not None
            and scope["type"] == "http"
            and scope["path"] == GENERATIONS_PATH
            and scope["method"] == "POST"
        ):
            await self.hot_route(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def create_app(
    policy: Policy, config: ServerConfig | None = None, *, runner: Runner | None = None
) -> ActionServerApp:
    """A FastAPI app serving `policy` through `runner`.

    The default runner is a `WorkerRunner` (a supervised inference process fed through shared
    memory), or a `ThreadRunner` when ``config.in_process`` is set. The app starts and stops
    the runner with its lifespan.
    """
    config = config or ServerConfig()
    if runner is None:
        runner = ThreadRunner(policy) if config.in_process else WorkerRunner(policy, config.worker)
    metadata = metadata_document(policy.spec, model=config.model_name)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        keep_freed_memory()
        await runner.start()
        try:
            yield
        finally:
            await runner.close()

    # The key check guards the FastAPI app and the hot route alike.
    middleware = (
        [Middleware(APIKeyMiddleware, api_key=config.api_key)] if config.api_key is not None else []
    )
    app = ActionServerApp(
        title="vla-client reference action server", lifespan=lifespan, middleware=middleware
    )
    app.state.config = config

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # The traceback stays in the server log; the client gets the id to quote.
        request_id = getattr(request.state, "request_id", None) or new_request_id()
        log.exception("unhandled error on %s (request %s)", request.url.path, request_id)
        return JSONResponse({"detail": f"internal server error (request {request_id})"}, 500)

    @app.exception_handler(InferenceError)
    async def _inference_error(request: Request, exc: InferenceError) -> JSONResponse:
        if exc.status_code == 500:
            request_id = getattr(request.state, "request_id", None)
            log.error("%s (request %s)", exc.detail, request_id, exc_info=exc.__cause__)
        headers = {"Retry-After": f"{exc.retry_after:g}"} if exc.retry_after is not None else None
        return JSONResponse({"detail": exc.detail}, exc.status_code, headers=headers)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/actions/metadata")
    async def action_metadata() -> dict[str, Any]:
        return metadata

    async def generations(request: Request) -> Response:
        start = time.perf_counter()
        content_type = request.headers.get("content-type")
        # A msgpack body goes straight into memory the runner lends (for the worker, shared
        # memory), so the arrays decoded from it reach the policy without a copy.
        memory = runner.lend_memory() if wants_msgpack(content_type, None) else None
        try:
            return await _answer(request, content_type, memory, start)
        finally:
            if memory is not None:
                memory.release()

    async def _answer(
        request: Request, content_type: str | None, memory: RequestMemory | None, start: float
    ) -> Response:
        body = await read_body(
            request,
            config.max_body_bytes,
            config.body_timeout_s,
            into=memory.reserve if memory is not None else None,
        )
        decoded = await _decode(body, content_type, config)
        request.state.request_id = decoded.request_id
        preprocess_ms = (time.perf_counter() - start) * 1000
        observation = policy_input(decoded, policy)
        actions, stage_timings = await infer_with_timeout(
            runner, observation, config.infer_timeout_s, memory
        )
        post_start = time.perf_counter()
        if decoded.runtime.return_digest:  # hashing every frame takes milliseconds
            reply = await run_in_threadpool(
                reply_document, decoded, actions, config.model_name, policy
            )
        else:  # a few hundred values: cheaper than the hop to a thread and back
            reply = reply_document(decoded, actions, config.model_name, policy)
        timings = {
            "preprocess_ms": preprocess_ms,
            **stage_timings,
            "postprocess_ms": (time.perf_counter() - post_start) * 1000,
            "total_ms": (time.perf_counter() - start) * 1000,
        }
        if decoded.runtime.return_timing:
            reply["timings"] = timings
        wire: Wire = (
            "msgpack" if wants_msgpack(content_type, request.headers.get("accept")) else "json"
        )
        return Response(dumps(reply, wire), media_type=CONTENT_TYPES[wire])

    app.add_api_route(
        GENERATIONS_PATH, generations, methods=["POST"], openapi_extra=generations_openapi()
    )
    app.hot_route = Starlette(
        routes=[Route(GENERATIONS_PATH, generations, methods=["POST"])],
        exception_handlers=dict(app.exception_handlers),
        middleware=middleware,
    )
    register_websocket_routes(app, policy, config, runner, metadata)
    return app


async def _decode(
    body: bytes | memoryview, content_type: str | None, config: ServerConfig
) -> DecodedRequest:
    """`decode_request`, in a worker thread only where that lets the event loop run meanwhile.

    Unpacking msgpack and turning its arrays or lists into frames holds the GIL, so a thread
    would only add its hop and wake-up; encoded images are decoded by OpenCV without the GIL,
    so those bodies (and every JSON body: base64 and image decoding) go to a thread.
    """
    try:
        wire = wire_for_content_type(content_type)
        if wire == "msgpack":
            payload = loads(body, wire)
            if not _has_encoded_images(payload):
                return decode_payload(payload, wire, limits=config.limits)
            return await run_in_threadpool(decode_payload, payload, wire, limits=config.limits)
        return await run_in_threadpool(decode_request, body, content_type, limits=config.limits)
    except UnsupportedContentTypeError as exc:
        raise HTTPException(415, str(exc)) from None
    except PayloadTooLargeError as exc:
        raise HTTPException(413, str(exc)) from None
    except CodecError as exc:
        raise HTTPException(400, str(exc)) from None


def _has_encoded_images(value: Any, depth: int = 0) -> bool:
    """Whether an unpacked msgpack document carries bytes or text big enough to be an image.

    Dicts are searched a few levels deep; a list is judged by its first item, so pixel lists
    are never walked.
    """
    if isinstance(value, bytes | str):
        return len(value) > _ENCODED_IMAGE_MIN_BYTES
    if not isinstance(value, dict | list) or not value:
        return False
    if depth > _MAX_SEARCH_DEPTH:
        return True
    if isinstance(value, dict):
        return any(_has_encoded_images(item, depth + 1) for item in value.values())
    return _has_encoded_images(value[0], depth + 1)

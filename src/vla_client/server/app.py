"""The reference action server: SGLang's action API on FastAPI, assembled from its parts.

`create_app` picks the runner (a supervised inference worker process by default, a thread
with ``in_process``), builds the request `Pipeline` around it, and puts the routes in front:
the HTTP edge (`vla_client.server.edge.http`), the websocket edge
(`vla_client.server.edge.websocket`), with ``config.ipc_path`` the Unix socket of ``ipc://``
clients (`vla_client.server.edge.ipc`) and Prometheus's ``/metrics``
(`vla_client.server.edge.metrics`). The API-key check wraps them all, and the request count
wraps that. The app's lifespan starts the runner in the background
(`vla_client.server.engine.startup`: the server listens, and ``/health`` says ``loading``,
while the policy loads), opens the request recorder when the config asks for
one (in each process that serves, so every entrypoint records its own requests), and stops
both on shutdown. With ``config.protocol`` it speaks another family's protocol too
(`vla_client.server.edge.families`): its routes, or its own socket while the app runs (its URL
in ``app.state.protocol_url``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from vla_client._version import __version__
from vla_client.errors import VLAClientError
from vla_client.protocol import GENERATIONS_PATH, HEALTH_PATH, METADATA_PATH
from vla_client.server.config import ServerConfig
from vla_client.server.edge.auth import APIKeyMiddleware
from vla_client.server.edge.families import family_socket, install_family
from vla_client.server.edge.http import failure_handler, generations_endpoint, health_endpoint
from vla_client.server.edge.ipc import IpcEdge
from vla_client.server.edge.metrics import METRICS_PATH, MetricsMiddleware, metrics_endpoint
from vla_client.server.edge.openapi import generations_openapi
from vla_client.server.edge.quiet_logs import quiet_refused_handshakes, redact_credentials_in_logs
from vla_client.server.edge.websocket import register_websocket_routes
from vla_client.server.engine.inference import Runner, ThreadRunner
from vla_client.server.engine.memory import keep_freed_memory
from vla_client.server.engine.pipeline import Pipeline
from vla_client.server.policy import Policy
from vla_client.server.recorder import RequestRecorder
from vla_client.server.worker import WorkerRunner


class ActionServerApp(FastAPI):
    """FastAPI, except that ``POST /v1/actions/generations`` goes straight to `hot_route`.

    Every robot request takes that path, and FastAPI's own layers (its exception telemetry
    and body-limit middleware, the exit stack its routes need, its dependency-solving route)
    cost the entrypoint 4-8% of its throughput at 16 clients, measured against the same
    endpoint in plain Starlette. `hot_route` is a plain Starlette app serving the same
    endpoint; the FastAPI route for the path stays, to document it in OpenAPI and to serve it
    if a request reaches it another way.

    What is the app's own is the hot route's too: when the app builds its middleware stack
    (on its first request, whichever path it takes), `hot_route` is given the app's user
    middleware (the API-key check, and anything added with `add_middleware` or
    ``@app.middleware``), its exception handlers and its ``debug``, in the same order. A
    middleware added after that raises `RuntimeError`, as Starlette's rule is for every app.
    Each middleware class is instantiated once per stack, the hot route's and the app's.
    """

    hot_route: Starlette | None = None

    def build_middleware_stack(self) -> ASGIApp:
        hot_route = self.hot_route
        if hot_route is not None:
            hot_route.user_middleware = list(self.user_middleware)
            hot_route.exception_handlers = dict(self.exception_handlers)
            hot_route.debug = self.debug
            hot_route.middleware_stack = hot_route.build_middleware_stack()
        return super().build_middleware_stack()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.middleware_stack is None:  # built before the first request, on either path
            self.middleware_stack = self.build_middleware_stack()
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
    """A FastAPI app serving `policy` through `runner` (default: as ``config`` says)."""
    config = config or ServerConfig()
    if runner is None:
        runner = ThreadRunner(policy) if config.in_process else WorkerRunner(policy, config.worker)
    pipeline = Pipeline(policy, runner, config)

    @asynccontextmanager
    async def lifespan(served: FastAPI) -> AsyncIterator[None]:
        # The family's socket first: where it listens is known before the policy is ready.
        async with family_socket(pipeline) as protocol_url, serving():
            served.state.protocol_url = protocol_url
            yield

    @asynccontextmanager
    async def serving() -> AsyncIterator[None]:
        keep_freed_memory()
        quiet_refused_handshakes()
        redact_credentials_in_logs()
        record = config.record
        if record is not None:
            pipeline.recorder = RequestRecorder(
                record.folder, max_bytes=record.max_bytes, max_files=record.max_files
            )
        pipeline.startup.begin()
        ipc = None if config.ipc_path is None else IpcEdge(pipeline, config.ipc_path)
        if ipc is not None:
            await ipc.start()
        if isinstance(runner, WorkerRunner) and runner.links:
            # An entrypoint of --api-servers links to a worker whose policy is loaded already:
            # it listens once linked, so a replacement for a killed one never answers "loading"
            # while its siblings serve (a failed link still serves 503s, as any failed start).
            await pipeline.startup.wait()
        try:
            yield
        finally:
            if ipc is not None:
                await ipc.close()
            await pipeline.startup.cancel()
            await runner.close()
            if pipeline.recorder is not None:  # writes what is queued: off the event loop
                await asyncio.to_thread(pipeline.recorder.close)

    # Outermost, the metrics: a refused key is a request too.
    middleware = [Middleware(MetricsMiddleware, metrics=pipeline.metrics)]
    if config.api_key is not None:
        middleware.append(Middleware(APIKeyMiddleware, api_key=config.api_key))
    failure_response = failure_handler(pipeline)
    handlers: dict[Any, Any] = {VLAClientError: failure_response, Exception: failure_response}
    app = ActionServerApp(
        title="vla-client reference action server",
        version=__version__,
        lifespan=lifespan,
        middleware=middleware,
        exception_handlers=handlers,
    )
    app.state.config = config
    app.state.pipeline = pipeline
    generations = generations_endpoint(pipeline)
    app.add_api_route(HEALTH_PATH, health_endpoint(pipeline.startup), methods=["GET"])

    async def action_metadata() -> dict[str, Any]:
        return pipeline.metadata

    app.add_api_route(METADATA_PATH, action_metadata, methods=["GET"])
    app.add_api_route(
        GENERATIONS_PATH, generations, methods=["POST"], openapi_extra=generations_openapi()
    )
    app.add_route(METRICS_PATH, metrics_endpoint(pipeline.metrics, runner), include_in_schema=False)
    app.hot_route = Starlette(routes=[Route(GENERATIONS_PATH, generations, methods=["POST"])])
    install_family(app, pipeline)  # first: RoboArena's route at / goes before openpi's
    register_websocket_routes(app, pipeline)
    pipeline.metrics.routes = frozenset(getattr(route, "path", "") for route in app.routes)
    return app

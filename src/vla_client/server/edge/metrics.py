"""Prometheus metrics at ``GET /metrics``: what an operator graphs and alerts on.

As SGLang's servers offer: requests by route and status, the latency of each stage of a request
(preprocess, queue, ipc, inference, postprocess, total, and the policy's own stages) as
histograms, the requests waiting for or in inference, the batch sizes sent to the policy, and
the shared memory the server holds.

Off the hot path: a request only adds to plain Python numbers (a dict entry, a histogram bucket
found by bisection; about a microsecond, no lock: everything runs on the event loop), and the
Prometheus text is built from them when a scraper asks (`MetricsCollector`, through
``prometheus_client``). The endpoint is behind the API key when one is set, like every route
but ``/health``. With ``--api-servers N`` each entrypoint counts its own requests, and a scrape
is answered by whichever entrypoint takes the connection.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vla_client.server.engine.inference import Runner
from vla_client.server.worker import WorkerRunner

METRICS_PATH = "/metrics"
STAGE_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
"""Upper bounds of the stage-latency buckets, in milliseconds."""
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
OTHER_ROUTE = "other"
"""The route label of a path the server does not serve: a client cannot make new series."""


class Histogram:
    """Counts per bucket and a sum, as Prometheus's histograms hold them; `bounds` ascending."""

    def __init__(self, bounds: Iterable[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last: past every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, float]]:
        """``(le, count)`` pairs, each count of values at or under its bound, as exposed."""
        pairs, total = [], 0
        labels = (*map(floatToGoString, self.bounds), "+Inf")
        for bound, count in zip(labels, self.counts, strict=True):
            total += count
            pairs.append((bound, float(total)))
        return pairs


class ServerMetrics:
    """What one serving process has counted since it started."""

    def __init__(self) -> None:
        self.routes: frozenset[str] = frozenset()
        """The paths the app serves (set once its routes are); others count as `OTHER_ROUTE`."""
        self.requests: Counter[tuple[str, str]] = Counter()
        self.stages: dict[str, Histogram] = {}
        self.in_inference = 0
        """Requests between admission to the runner and its answer: queued or running."""

    def count(self, path: str, status: int) -> None:
        """One request (or websocket message) to `path`, answered with `status`."""
        route = path if path in self.routes else OTHER_ROUTE
        self.requests[route, str(status)] += 1

    def observe(self, timings: Mapping[str, float]) -> None:
        """A served request's stage timings, in milliseconds."""
        for stage, ms in timings.items():
            histogram = self.stages.get(stage)
            if histogram is None:
                histogram = self.stages[stage] = Histogram(STAGE_BUCKETS_MS)
            histogram.observe(ms)


class MetricsMiddleware:
    """Counts every HTTP request by route and the status it was answered with (a refused
    API key, a 413 read before the app, a 404 alike); websocket messages are counted where
    they are answered."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what the client gets when the app raises before it answers

        async def noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, noting_status)
        finally:
            self.metrics.count(scope["path"], status)


class MetricsCollector(Collector):
    """`ServerMetrics` and the runner's own numbers (its batch sizes; the worker layout's shared
    memory) as Prometheus metric families, built at each scrape."""

    def __init__(self, metrics: ServerMetrics, runner: Runner) -> None:
        self.metrics = metrics
        self.runner = runner

    def collect(self) -> Iterator[Metric]:
        metrics = self.metrics
        requests = CounterMetricFamily(
            "vla_requests", "Requests (and websocket messages) answered", labels=["route", "status"]
        )
        for (route, status), count in sorted(metrics.requests.items()):
            requests.add_metric([route, status], count)
        yield requests
        stages = HistogramMetricFamily(
            "vla_stage_latency_milliseconds",
            "Time a served request spent in each stage",
            labels=["stage"],
        )
        for stage, histogram in sorted(metrics.stages.items()):
            stages.add_metric([stage], histogram.cumulative(), histogram.sum)
        yield stages
        yield GaugeMetricFamily(
            "vla_queue_depth",
            "Requests admitted to inference and not yet answered (queued or running)",
            value=metrics.in_inference,
        )
        batches = Histogram(BATCH_BUCKETS)
        for size, count in self.runner.batch_sizes.items():
            batches.counts[bisect_left(batches.bounds, size)] += count
            batches.sum += size * count
        family = HistogramMetricFamily("vla_batch_size", "Requests per policy call")
        family.add_metric([], batches.cumulative(), batches.sum)
        yield family
        if isinstance(self.runner, WorkerRunner):  # in-process serving uses no shared memory
            yield GaugeMetricFamily(
                "vla_shm_bytes", "Shared memory held by the server's slots, idle ones included",
                value=self.runner.shm_bytes,
            )  # fmt: skip
            yield GaugeMetricFamily(
                "vla_shm_slots_in_use", "Shared-memory slots held by requests now",
                value=self.runner.slots_in_use,
            )  # fmt: skip


def metrics_endpoint(
    metrics: ServerMetrics, runner: Runner
) -> Callable[[Request], Awaitable[Response]]:
    """The ``GET /metrics`` handler: Prometheus's text format, built on the event loop (a few
    dozen series, well under a millisecond), so it reads numbers no request is changing."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MetricsCollector(metrics, runner))

    async def scrape(request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return scrape

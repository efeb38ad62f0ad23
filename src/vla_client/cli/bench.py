"""``vla-client bench``: every encoding x wire x transport against one server, ranked.

By default it starts the reference server on a free loopback port (extra ``server``), so the
numbers measure codecs and transport, not a model; give a URL to measure a real deployment.
Each path gets warm-up requests, then ``--repeat`` timed ones with the same synthetic camera
frames. It prints a table ranked by median end-to-end latency, ``--plot FILE.png`` draws the
latency distributions and bytes on the wire (needs matplotlib), and ``--save FILE.json`` writes
the report that ``benchmarks/render_encoding_table.py`` turns into the docs' encoding table.
Both output paths, matplotlib and the websocket library (for ``--transports ws``) are checked
before the first request. An ``ipc://PATH`` URL has one path: raw frames in shared memory.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import platform
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from vla_client.cli.checks import check_output_file, file_type, require_module
from vla_client.cli.common import (
    add_connection_options,
    add_state_split_option,
    connect_option,
    dialect,
    is_gr00t,
    server_metadata,
    stage_samples,
    state_split,
)
from vla_client.cli.failures import failure_line, not_a_vla_server
from vla_client.cli.output import fail, print_table
from vla_client.cli.parser import non_negative_int, positive_int
from vla_client.cli.progress import Progress
from vla_client.cli.server_wait import wait_for_server
from vla_client.cli.sources import SyntheticPlan, add_synthetic_options, synthetic_plan
from vla_client.errors import VLAClientError
from vla_client.protocol.names import ENCODINGS, WIRES, Encoding, Wire

if TYPE_CHECKING:  # imported where used: the options are added without them
    from vla_client.client import ActionResult
    from vla_client.observation import Observation

TRANSPORTS = ("http", "ws")
PLOT_SUFFIXES = (".png", ".svg", ".pdf")
REPORT_FORMAT = "vla-client.bench"


@dataclass
class PathResult:
    """One encoding/wire/transport path: per-stage percentiles and every total, or an error."""

    encoding: Encoding
    wire: Wire
    transport: str
    bytes_sent: int = 0
    stages: dict[str, dict[str, float]] = field(default_factory=dict)
    totals_ms: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def name(self) -> str:
        return f"{self.encoding}/{self.wire}/{self.transport}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.name, "encoding": self.encoding, "wire": self.wire,
            "transport": self.transport, "bytes_sent": self.bytes_sent, "stages": self.stages,
            "totals_ms": self.totals_ms, "error": self.error,
        }  # fmt: skip


def register(parser: argparse.ArgumentParser) -> None:
    """The command's options, on its `parser`."""
    add_connection_options(parser, url_default=None)
    parser.add_argument(
        "--encodings", type=_subset(ENCODINGS), default=",".join(ENCODINGS),
        help="comma-separated subset",
    )  # fmt: skip
    parser.add_argument(
        "--wires", type=_subset(WIRES), default=",".join(WIRES), help="comma-separated subset"
    )
    parser.add_argument(
        "--transports", type=_subset(TRANSPORTS), default=None,
        help="comma-separated subset of http, ws (default: every one installed)",
    )  # fmt: skip
    parser.add_argument("--repeat", type=positive_int, default=10, help="timed requests per path")
    parser.add_argument(
        "--warmup", type=non_negative_int, default=2, help="untimed requests per path"
    )
    add_synthetic_options(parser)
    add_state_split_option(parser)
    parser.add_argument(
        "--save", metavar="FILE.json", type=file_type(".json"), help="write the report as JSON"
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", type=file_type(*PLOT_SUFFIXES),
        help="save latency and size plots (needs matplotlib)",
    )  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vla_client.client import ActionClient

    try:
        paths = _paths(args)
        _check_outputs(args, paths)
        fit = _client_options(args)
        wait_for_server(args.url, args.wait_for_server)
        with _server(args.url) as url:
            with ActionClient(url, timeout_s=args.timeout, api_key=args.api_key, **fit) as probe:
                plan = synthetic_plan(args, server_metadata(probe))
            observations = bench_observations(plan)
            results = run_matrix(
                url, paths, observations, repeat=args.repeat, warmup=args.warmup,
                timeout=args.timeout, api_key=args.api_key, options=fit,
            )  # fmt: skip
        if all(result.error is not None for result in results):
            raise VLAClientError(
                not_a_vla_server(args.url)
                or f"every path failed; {results[0].name}: {results[0].error}"
            )
        _write_outputs(build_report(results, args, url, plan), args)
    except (VLAClientError, ValueError, ImportError, OSError) as exc:
        return fail(failure_line(exc, args))
    _print_ranking(results, url)
    if args.save:
        print(f"saved report to {args.save}")
    if args.plot:
        print(f"saved plot to {args.plot}")
    return 1 if any(result.error is not None for result in results) else 0


def _client_options(args: argparse.Namespace) -> dict[str, Any]:
    """What every client of the run is given besides its URL: GR00T's ``state_split``, how it
    connects, the ``endpoint`` of a server with its own dialect."""
    split = state_split(args)
    fit: dict[str, Any] = {"state_split": split} if split else {}
    fit.update(connect_option(args))
    if family := dialect(args):
        fit["endpoint"] = family
    return fit


def _write_outputs(report: dict[str, Any], args: argparse.Namespace) -> None:
    """The `report` as ``--save``'s JSON and ``--plot``'s figures, where asked for."""
    import orjson

    if args.save:
        Path(args.save).write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    if args.plot:
        plot_report(report, args.plot)


def bench_observations(plan: SyntheticPlan, count: int = 4) -> list[Observation]:
    """A few distinct synthetic multi-camera observations (so no path gets a cached frame)."""
    from vla_client.cameras.scene import SyntheticScene
    from vla_client.observation import Observation

    scenes = [SyntheticScene(plan.height, plan.width, seed=i) for i in range(len(plan.names))]
    return [
        Observation(
            {name: scene.render(t) for name, scene in zip(plan.names, scenes, strict=True)},
            state=plan.state,
            task="bench",
        )
        for t in range(count)
    ]


def run_matrix(
    url: str,
    paths: Sequence[tuple[Encoding, Wire, str]],
    observations: Sequence[Observation],
    *,
    repeat: int,
    warmup: int = 2,
    timeout: float = 60.0,
    api_key: str | None = None,
    options: dict[str, Any] | None = None,
) -> list[PathResult]:
    """Measure each path; a path that fails is kept with its error, the others still run.
    `options` go to every client (GR00T's ``state_split``, the ``endpoint`` of a server with
    its own dialect); the ``zmq`` path is GR00T's server, the ``ipc`` path a server's Unix
    socket and an ``endpoint`` names a dialect, each of which takes its own encoding."""
    from vla_client.client import ActionClient

    results = []
    with Progress(len(paths) * (repeat + warmup), label="bench") as bar:
        for encoding, wire, transport in paths:
            result = PathResult(encoding, wire, transport)
            try:
                codec: dict[str, Any] = {"encoding": encoding, "wire": wire}
                if transport in ("zmq", "ipc") or "endpoint" in (options or {}):
                    codec = {}
                with ActionClient(_transport_url(url, transport), **codec, timeout_s=timeout,
                                  api_key=api_key, **(options or {})) as client:  # fmt: skip
                    frames = itertools.cycle(observations)
                    for _ in range(warmup):
                        client.infer(next(frames))
                        bar.advance()
                    timed = []
                    for _ in range(repeat):
                        timed.append(client.infer(next(frames)))
                        bar.advance()
                _summarise(result, timed)
            except (VLAClientError, ValueError) as exc:
                result.error = str(exc).splitlines()[0]
            results.append(result)
    return results


def build_report(
    results: Sequence[PathResult], args: argparse.Namespace, url: str, plan: SyntheticPlan
) -> dict[str, Any]:
    """The JSON report: setup, machine and every path's numbers."""
    return {
        "format": REPORT_FORMAT,
        "version": 1,
        "server": "local reference server" if args.url is None else url,
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
        },
        "frames": {"cameras": len(plan.names), "height": plan.height, "width": plan.width},
        "repeat": args.repeat,
        "warmup": args.warmup,
        "results": [result.as_dict() for result in rank(results)],
    }


def rank(results: Sequence[PathResult]) -> list[PathResult]:
    """Fastest median end-to-end first; failed paths last."""
    return sorted(
        results,
        key=lambda r: (r.error is not None, r.stages.get("total_ms", {}).get("p50", float("inf"))),
    )


def plot_report(report: dict[str, Any], path: str) -> None:
    """Latency distributions (box plots) and bytes on the wire per path, side by side."""
    require_module("matplotlib", "--plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator, StrMethodFormatter

    rows = [row for row in report["results"] if row["error"] is None]
    names = [row["path"] for row in rows]
    figure, (latency, size) = plt.subplots(1, 2, figsize=(12, 0.45 * len(rows) + 1.5), sharey=True)
    latency.boxplot([row["totals_ms"] for row in rows], orientation="horizontal", tick_labels=names)
    latency.set_xscale("log")
    latency.set_xlabel("end-to-end latency per request (ms, log)")
    latency.invert_yaxis()
    size.barh(range(1, len(rows) + 1), [row["bytes_sent"] / 1e6 for row in rows])
    size.set_xscale("log")
    size.set_xlabel("request body (MB, log)")
    spans = (
        [value for row in rows for value in row["totals_ms"]],
        [row["bytes_sent"] / 1e6 for row in rows],
    )
    for axis, values in zip((latency, size), spans, strict=True):
        axis.set_xticks(log_ticks(min(values), max(values)))
        axis.xaxis.set_major_formatter(StrMethodFormatter("{x:.4g}"))
        axis.xaxis.set_minor_locator(NullLocator())
    frames = report["frames"]
    figure.suptitle(
        f"{frames['cameras']} cameras {frames['height']}x{frames['width']}, "
        f"{report['repeat']} requests per path, {report['server']}"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _summarise(result: PathResult, timed: list[ActionResult]) -> None:
    from vla_client.control.stats import percentiles

    result.bytes_sent = timed[-1].timings.bytes_sent
    result.totals_ms = [r.timings.total_ms for r in timed]
    for name, values in stage_samples(timed):
        summary = percentiles(values)
        result.stages[name.replace(" ", "_") + "_ms"] = {
            "p50": summary.p50,
            "p90": summary.p90,
            "p99": summary.p99,
            "mean": statistics.fmean(values),
        }


def _print_ranking(results: Sequence[PathResult], url: str) -> None:
    print(f"server {url}\n")
    rows: list[tuple[object, ...]] = []
    for position, result in enumerate(rank(results), start=1):
        if result.error is not None:
            rows.append((result.name, "-", "-", "-", "-", "-", f"failed: {result.error}"))
            continue
        stage = result.stages
        rows.append((
            result.name, f"{result.bytes_sent / 1e6:.2f}", stage["encode_ms"]["p50"],
            stage.get("server_preprocess_ms", {}).get("p50", "-"),
            stage["total_ms"]["p50"], stage["total_ms"]["p99"], f"#{position}",
        ))  # fmt: skip
    print_table(
        ("path", "MB sent", "encode p50", "server decode p50", "total p50", "total p99", "rank"),
        rows,
    )
    print("\nms; total = client encode + round trip + client decode")


def log_ticks(low: float, high: float) -> list[float]:
    """Where to label a log axis spanning `low`..`high` (> 0): at the powers of ten inside it,
    or at 1, 2 and 5 times them, or at every digit's, whichever first gives three labels; a span
    too narrow for any of them is labelled at its two ends."""
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    inside: list[float] = []
    for digits in ((1,), (1, 2, 5), range(1, 10)):
        inside = [d * 10.0**e for e in decades for d in digits if low <= d * 10.0**e <= high]
        if len(inside) >= 3:
            return inside
    return inside if len(inside) >= 2 else sorted({low, high, *inside})


def _check_outputs(args: argparse.Namespace, paths: Sequence[tuple[str, str, str]]) -> None:
    """Everything the run will need at its end, checked before it starts."""
    if args.save:
        check_output_file(args.save, "--save")
    if args.plot:
        check_output_file(args.plot, "--plot")
        require_module("matplotlib", "--plot")
    if any(transport == "ws" for _, _, transport in paths):
        require_module("websockets", "--transports ws")
    if any(transport == "zmq" for _, _, transport in paths):
        require_module("zmq", f"GR00T's server at {args.url}")


def _paths(args: argparse.Namespace) -> list[tuple[Encoding, Wire, str]]:
    from vla_client.client.families import DIALECTS

    if args.endpoint not in (None, "gr00t", *DIALECTS):
        raise argparse.ArgumentError(
            None, "bench measures every path of the action API; --endpoint takes "
            f"{', '.join(('gr00t', *DIALECTS))} only",
        )  # fmt: skip
    if only := _only_path(args):
        return [only]
    if args.state_split:
        raise argparse.ArgumentError(None, "--state-split is for GR00T's server (tcp:// URLs)")
    encodings = cast(list[Encoding], args.encodings)
    wires = cast(list[Wire], args.wires)
    transports = args.transports or installed_transports()
    # websockets carry msgpack frames only, so json/ws is not a path
    return [
        (encoding, wire, transport)
        for encoding, wire, transport in itertools.product(encodings, wires, transports)
        if not (transport == "ws" and wire == "json")
    ]


def _only_path(args: argparse.Namespace) -> tuple[Encoding, Wire, str] | None:
    """The one path of a server that has only one, or None for the action API's matrix."""
    if is_gr00t(args):  # GR00T's raw arrays in its msgpack, over ZeroMQ
        return ("raw", "msgpack", "zmq")
    if dialect(args):  # raw arrays in the family's msgpack, over its websocket
        return ("raw", "msgpack", "ws")
    if (args.url or "").startswith("ipc://"):  # raw frames in shared memory
        return ("raw", "msgpack", "ipc")
    return None


def _subset(allowed: Sequence[str]) -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated, non-empty subset of `allowed`."""

    def parse(text: str) -> list[str]:
        chosen = [item.strip() for item in text.split(",") if item.strip()]
        if not chosen or any(item not in allowed for item in chosen):
            raise argparse.ArgumentTypeError(
                f"takes a comma-separated subset of {', '.join(allowed)}, got {text!r}"
            )
        return chosen

    return parse


def installed_transports() -> list[str]:
    """``http``, plus ``ws`` when the websocket transport is installed."""
    try:
        import vla_client.transports.websocket  # noqa: F401
    except ImportError:
        return ["http"]
    return ["http", "ws"]


def _transport_url(url: str, transport: str) -> str:
    if transport == "ws":
        return "ws" + url.removeprefix("http") if url.startswith("http") else url
    return url


@contextlib.contextmanager
def _server(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    try:
        from vla_client.server import LocalServer, ReferencePolicy, create_app
    except ImportError:
        raise ImportError(
            "bench starts a local server, which needs the 'server' extra: "
            "pip install 'vla-client[server]'"
        ) from None
    with LocalServer(create_app(ReferencePolicy())) as server:
        yield server.url

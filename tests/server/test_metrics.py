"""``GET /metrics``: Prometheus's text, behind the API key, counting what the server did.

A real server in the default worker layout, real requests (served, refused as bad input,
refused for the key, to a path that does not exist, over the realtime websocket), then the
scrape parsed with prometheus_client's own parser.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from served import serve
from websockets.sync.client import connect

from vla_client.cameras.scene import synthetic_frames
from vla_client.observation import Observation
from vla_client.protocol import GENERATIONS_PATH, encode_request, loads
from vla_client.server import LocalServer, ReferencePolicy

KEY = "metrics-test-key"
AUTH = {"authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    running = serve(ReferencePolicy(), "worker", api_key=KEY)
    yield running
    running.stop()


def scrape(server: LocalServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reply = httpx.get(server.url + "/metrics", headers=AUTH)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(reply.text)
        for sample in family.samples
    }


def requests(samples: dict, route: str, status: int) -> float:
    return samples.get(("vla_requests_total", (("route", route), ("status", str(status)))), 0.0)


def test_metrics_need_the_key_and_count_requests_stages_batches_and_memory(
    server: LocalServer,
) -> None:
    assert httpx.get(server.url + "/metrics").status_code == 401
    before = scrape(server)
    body, content_type = encode_request(
        Observation(images=synthetic_frames(1, 32, 32)), wire="msgpack", encoding="raw"
    )
    headers = {**AUTH, "content-type": content_type}
    with httpx.Client(base_url=server.url) as client:
        for _ in range(3):
            assert client.post(GENERATIONS_PATH, content=body, headers=headers).status_code == 200
        bad = client.post(GENERATIONS_PATH, content=b"\x92\xc1", headers=headers)
        assert bad.status_code == 400
        assert client.post(GENERATIONS_PATH, content=body).status_code == 401
        assert client.get("/no/such/path", headers=AUTH).status_code == 404
    with connect(
        server.url.replace("http", "ws", 1) + "/v1/actions/realtime", additional_headers=AUTH
    ) as ws:
        ws.recv()  # the metadata
        ws.send(body)
        assert "data" in loads(ws.recv(), "msgpack")
    after = scrape(server)

    def added(route: str, status: int) -> float:
        return requests(after, route, status) - requests(before, route, status)

    assert added(GENERATIONS_PATH, 200) == 3
    assert added(GENERATIONS_PATH, 400) == 1
    assert added(GENERATIONS_PATH, 401) == 1
    assert added("other", 404) == 1, "an unknown path makes no series of its own"
    assert added("/v1/actions/realtime", 200) == 1
    assert not any("no/such" in dict(labels).get("route", "") for _, labels in after)
    inference = ("vla_stage_latency_milliseconds_count", (("stage", "inference_ms"),))
    assert after[inference] - before.get(inference, 0) == 4  # 3 over HTTP, 1 on the websocket
    total = (
        "vla_stage_latency_milliseconds_bucket",
        (("le", "+Inf"), ("stage", "total_ms")),
    )
    assert after[total] >= 4
    assert after[("vla_queue_depth", ())] == 0
    assert after[("vla_batch_size_count", ())] - before.get(("vla_batch_size_count", ()), 0) == 4
    assert after[("vla_batch_size_bucket", (("le", "1.0"),))] >= 4
    assert after[("vla_shm_bytes", ())] >= 1 << 20, "an idle slot stays for reuse"
    assert after[("vla_shm_slots_in_use", ())] == 0

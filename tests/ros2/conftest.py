"""Fixtures for the live ROS 2 tests: a Zenoh router on 127.0.0.1 and an independent ROS 2 peer.

The router plays rmw_zenohd's part (`ros2 run rmw_zenoh_cpp rmw_zenohd`): an eclipse-zenoh
session opened in "router" mode, listening on a free loopback port, with multicast scouting off so
that runs beside each other never meet. Each test gets its own router, so a node left behind by
one test is never seen by the next.

The peer (`peer.py`) is zenoh-ros2-sdk, an implementation of rmw_zenoh's conventions written by
others, so a test that passes shows our node and a second reading of the conventions agree. The
tests skip when eclipse-zenoh or zenoh-ros2-sdk is not installed (the `ros2` extra and the test
install of docs/testing.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from peer import Peer

    from vla_client.ros2.graph import Node


def _listening_endpoint(session: object, deadline_s: float = 5.0) -> str:
    """The router's own tcp locator, read from its admin space (it listens on port 0)."""
    zid = str(session.info.zid())  # type: ignore[attr-defined]
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for reply in session.get(f"@/{zid}/router", timeout=1.0):  # type: ignore[attr-defined]
            if reply.ok is not None:
                locators = json.loads(reply.ok.payload.to_string()).get("locators", [])
                tcp = [locator for locator in locators if locator.startswith("tcp/")]
                if tcp:
                    return str(tcp[0])
        time.sleep(0.05)
    raise RuntimeError("the test router did not report the port it listens on")


@pytest.fixture
def zenoh_router() -> Iterator[str]:
    """A Zenoh router on a free 127.0.0.1 port; yields its endpoint ("tcp/127.0.0.1:40123")."""
    zenoh = pytest.importorskip("zenoh")
    config = zenoh.Config()
    config.insert_json5("mode", '"router"')
    config.insert_json5("listen/endpoints", '["tcp/127.0.0.1:0"]')
    config.insert_json5("scouting/multicast/enabled", "false")
    config.insert_json5("adminspace/enabled", "true")
    router = zenoh.open(config)
    try:
        yield _listening_endpoint(router)
    finally:
        router.close()


@pytest.fixture
def peer(zenoh_router: str) -> Iterator[Peer]:
    """An independent ROS 2 peer (zenoh-ros2-sdk) on the test's router, domain 0."""
    pytest.importorskip("zenoh_ros2_sdk")
    from peer import Peer

    with Peer(zenoh_router) as independent:
        yield independent


@pytest.fixture
def node(zenoh_router: str) -> Iterator[Node]:
    """Our node, "vla_client_test" in the root namespace, on the test's router (closed after)."""
    pytest.importorskip("zenoh")
    from vla_client.ros2.graph import Node

    with Node("vla_client_test", router=zenoh_router) as ours:
        yield ours

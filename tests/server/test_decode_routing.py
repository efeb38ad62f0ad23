"""Which msgpack bodies the entrypoint decodes inline and which it sends to a thread."""

import numpy as np
import pytest

from vla_client import Observation
from vla_client.protocol import encode_request, loads
from vla_client.protocol.request import build_openpi_request
from vla_client.server.engine.pipeline import has_encoded_images


@pytest.fixture
def frames():
    rng = np.random.default_rng(0)
    return {"top": rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)}


@pytest.mark.parametrize(("encoding", "encoded"), [("raw", False), ("png", True), ("jpeg", True)])
def test_only_encoded_images_go_to_a_thread(frames, encoding, encoded):
    body, _ = encode_request(Observation(frames, task="t"), encoding=encoding, wire="msgpack")
    assert has_encoded_images(loads(body, "msgpack")) is encoded


def test_flat_openpi_arrays_and_base64_text(frames):
    flat = build_openpi_request(Observation(frames, task="t"))
    assert has_encoded_images(flat) is False
    body, _ = encode_request(Observation(frames, task="t"), encoding="png", wire="json")
    assert has_encoded_images(loads(body, "json")) is True  # base64 text


def test_pixel_lists_are_judged_by_their_first_item_not_walked(frames):
    document = {"input": {"observation": {"images": {"top": frames["top"].tolist()}}}}
    assert has_encoded_images(document) is False
    assert has_encoded_images({"a": [b"\x89PNG" + bytes(2000)]}) is True


def test_a_deeply_nested_document_is_not_searched_to_the_bottom():
    document: dict[str, object] = {}
    for _ in range(50):
        document = {"x": document}
    assert has_encoded_images(document) is True

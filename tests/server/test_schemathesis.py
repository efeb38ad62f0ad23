"""Schema fuzzing: requests generated from the server's own OpenAPI document, sent to a real server.

Whatever schemathesis generates from the document (including bodies that only fit the schema by
shape, with nonsense images), the server must answer without a 5xx, with a status code and
content type the document declares; every refusal is JSON with a non-empty ``detail``. And
the other way round: a body the schema allows, once it carries real images and parameters the
policy can take, must be accepted, over JSON and msgpack, and answered as its runtime block
asks. (schemathesis' pytest plugin does not load under pytest 9, so the operations' strategies
are driven by hypothesis directly.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from oracles import frame_digest_of
from vla_client.codecs import b64encode_text, encode_png, msgpack_numpy
from vla_client.errors import CodecError
from vla_client.protocol import GENERATIONS_PATH, SamplingParameters
from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app

OPERATIONS = [
    ("/health", "GET"), ("/v1/actions/metadata", "GET"), ("/v1/actions/generations", "POST"),
]  # fmt: skip
FRAME = np.random.default_rng(2).integers(0, 256, (12, 16, 3), dtype=np.uint8)
PNG = {"b64_json": b64encode_text(encode_png(FRAME))}
BODY_FIELDS = {"request_id", "model", "input", "parameters", "runtime"}


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    config = ServerConfig(in_process=True, body_timeout_s=5.0)
    with LocalServer(create_app(ReferencePolicy(), config)) as server:
        yield server.url


def test_the_document_describes_the_generations_body(server_url: str) -> None:
    schema = schemathesis.openapi.from_url(f"{server_url}/openapi.json")
    body = schema.raw_schema["paths"]["/v1/actions/generations"]["post"]["requestBody"]
    assert set(body["content"]) == {"application/json", "application/msgpack"}
    assert body["content"]["application/json"]["schema"]["required"] == ["input"]


def assert_answered_well(response: Any) -> None:
    """No 5xx ever; every refusal a JSON object with a non-empty string ``detail``."""
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        content_type = response.headers.get("content-type")
        if isinstance(content_type, list):  # schemathesis keeps every value of a header
            content_type = content_type[0]
        assert content_type.startswith("application/json"), response.headers
        detail = response.json()["detail"]
        assert isinstance(detail, str) and detail.strip(), response.text


@pytest.mark.parametrize(("path", "method"), OPERATIONS)
def test_server_conforms_to_its_openapi_document(server_url: str, path: str, method: str) -> None:
    schema = schemathesis.openapi.from_url(f"{server_url}/openapi.json")
    operation = schema[path][method]

    @given(case=operation.as_strategy())
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    def call(case: schemathesis.Case) -> None:
        # Not positive_data_acceptance: the schema cannot say which image values decode (that
        # is the codecs' job), so schema-valid bodies are often, rightly, 400s. The test below
        # checks acceptance with real images instead.
        response = case.call_and_validate(
            base_url=server_url, excluded_checks=[positive_data_acceptance]
        )
        assert_answered_well(response)

    call()


def with_real_images(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as generated, with a real camera and state, and no parameter the policy checks.

    Everything else the schema let the generator choose stays: the request id, model, task,
    capture times, runtime options and unknown parameters (which the server keeps and ignores).
    """
    body = {key: value for key, value in body.items() if key in BODY_FIELDS}
    observation = body["input"].get("observation") or {}
    body["input"] = {
        key: value for key, value in body["input"].items() if key in ("task", "prompt")
    }
    body["input"]["observation"] = {"images": {"cam": PNG}, "state": [0.5, -0.5]}
    if observation.get("capture_times") is not None:
        body["input"]["observation"]["capture_times"] = observation["capture_times"]
    checked = set(SamplingParameters.model_fields)
    body["parameters"] = {
        key: value for key, value in (body.get("parameters") or {}).items() if key not in checked
    }
    return body


def assert_answers_as_asked(body: dict[str, Any], document: dict[str, Any]) -> None:
    runtime = body.get("runtime") or {}
    raw = str(runtime.get("response_format", "envelope")).lower() == "raw"
    if raw:
        assert np.asarray(document["actions"]).shape == (16, 7)
    else:
        assert document["object"] == "action.generation"
        assert np.asarray(document["data"][0]["action"]["values"]).shape == (16, 7)
    if body.get("request_id"):  # an empty id is no id: the server makes one
        assert document["request_id" if raw else "id"] == body["request_id"]
    assert ("timings" in document) is runtime.get("return_timing", True)
    if runtime.get("return_digest"):
        assert document["digests"] == {"cam": frame_digest_of(FRAME)}
    else:
        assert "digests" not in document


def test_schema_valid_bodies_with_real_images_are_accepted(server_url: str) -> None:
    schema = schemathesis.openapi.from_url(f"{server_url}/openapi.json")
    operation = schema["/v1/actions/generations"]["POST"]

    @given(case=operation.as_strategy())
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    def call(case: schemathesis.Case) -> None:
        body = with_real_images(case.body)
        case.body = body
        response = case.call(base_url=server_url)
        assert response.status_code == 200, (body, response.text)
        assert_answers_as_asked(body, response.json())
        try:
            content = msgpack_numpy.packb(body)
        except CodecError:  # JSON carries ints of any size, msgpack only 64-bit ones
            return
        packed = httpx.post(
            server_url + GENERATIONS_PATH,
            content=content,
            headers={"content-type": "application/msgpack"},
            timeout=30,
        )
        assert packed.status_code == 200, (body, packed.text)
        assert_answers_as_asked(body, msgpack_numpy.unpackb(packed.content))

    call()

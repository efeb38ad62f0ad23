"""Schema fuzzing: requests generated from the server's own OpenAPI document, sent to a real server.

Whatever schemathesis generates from the document (including bodies that only fit the schema by
shape, with nonsense images), the server must answer without a 5xx, with a status code and
content type the document declares. (schemathesis' pytest plugin does not load under pytest 9,
so the operations' strategies are driven by hypothesis directly.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from vla_client.server import LocalServer, ReferencePolicy, ServerConfig, create_app

OPERATIONS = [
    ("/health", "GET"), ("/v1/actions/metadata", "GET"), ("/v1/actions/generations", "POST"),
]  # fmt: skip


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


@pytest.mark.parametrize(("path", "method"), OPERATIONS)
def test_server_conforms_to_its_openapi_document(server_url: str, path: str, method: str) -> None:
    schema = schemathesis.openapi.from_url(f"{server_url}/openapi.json")
    operation = schema[path][method]

    @given(case=operation.as_strategy())
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    def call(case: schemathesis.Case) -> None:
        # Not positive_data_acceptance: the schema cannot say which image values decode (that
        # is the codecs' job), so schema-valid bodies are often, rightly, 400s.
        case.call_and_validate(base_url=server_url, excluded_checks=[positive_data_acceptance])

    call()

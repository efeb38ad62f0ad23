"""The OpenAPI description of POST /v1/actions/generations.

The route reads its body itself (it may be JSON or msgpack and is bounded before parsing), so
FastAPI cannot infer the body's schema; this module states it, from the same pydantic model the
client builds requests with, with every ``$ref`` inlined so the document stands alone. Schema
fuzzers (tests/server/test_schemathesis.py) and API explorers rely on it.
"""

from __future__ import annotations

from typing import Any

from vla_client.protocol import ActionRequest

_ERRORS = {
    "400": "malformed body or invalid request (the detail names the field)",
    "401": "missing or invalid API key",
    "408": "the body did not arrive within the body timeout",
    "413": "body, image or camera count over the server's limits",
    "415": "content type other than JSON or msgpack",
    "503": "too many connections, or the policy is not available",
    "504": "inference did not finish within the inference timeout",
}

_DETAIL = {"type": "object", "properties": {"detail": {"type": "string"}}}


def generations_openapi() -> dict[str, Any]:
    """``openapi_extra`` for the generations route: its request body and its error replies."""
    schema = _inline(ActionRequest.model_json_schema())
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": schema},
                "application/msgpack": {"schema": schema},
            },
        },
        "responses": {
            code: {"description": text, "content": {"application/json": {"schema": _DETAIL}}}
            for code, text in _ERRORS.items()
        },
    }


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    definitions = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str) and reference.startswith("#/$defs/"):
                return resolve(definitions[reference.removeprefix("#/$defs/")])
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved

"""The server's edge: what stands between a client's bytes and the request pipeline.

It bounds what a client may send and how: the HTTP route (`http`) and the websocket routes
(`websocket`) that turn bytes into a request for `vla_client.server.engine.pipeline` and its
reply or failure back into bytes; the API-key check (`auth`); the body limits (`limits`: 413 for
too much, 408 for too slow); uvicorn's connection protocol with a deadline on the headers and a
body read straight into memory (`connections`); the OpenAPI description (`openapi`); Prometheus's
``/metrics`` (`metrics`); and logs that a client can neither flood nor read keys from
(`quiet_logs`). Nothing here runs a policy.
"""

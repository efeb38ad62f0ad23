"""The server's engine: what runs a request once the edge has let it in.

`pipeline` is the one path every request takes (decode, check against the policy, run, reply);
`inference` is the runner interface and the in-process runner (the worker process,
`vla_client.server.worker`, is the other); `startup` loads the policy while the server already
listens; `failure_log` logs each distinct failure once; `device_decode` decodes JPEG where a
torch policy runs; `memory` keeps freed memory mapped between requests; `lifeline` ends a child
process when the process that started it dies.
"""

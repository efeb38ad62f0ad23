"""``python -m vla_client.server.worker FD [LISTENER_FD]``: the inference worker (process.py)."""

import sys

from vla_client.server.worker.process import worker_main

if __name__ == "__main__":
    worker_main(*(int(fd) for fd in sys.argv[1:3]))

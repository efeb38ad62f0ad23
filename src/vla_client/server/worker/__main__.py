"""``python -m vla_client.server.worker FD``: the inference worker process (see process.py)."""

import sys

from vla_client.server.worker.process import worker_main

if __name__ == "__main__":
    worker_main(int(sys.argv[1]))

# vla-client's reference action server, `vla-client serve`, in a container.
#
#   docker build -t vla-client .                                   # CPU (python:3.11-slim)
#   docker build -t vla-client:cuda \
#       --build-arg BASE_IMAGE=nvidia/cuda:12.4.1-runtime-ubuntu22.04 \
#       --build-arg EXTRAS=server,torch .                          # CUDA base, torch policies
#   docker run --rm -p 8000:8000 --shm-size=256m -e VLA_CLIENT_API_KEY=... vla-client
#
# Give /dev/shm room with --shm-size: every request in the server holds a shared-memory slot
# of about its decoded frames, and Docker's default of 64 MiB is short for more than a few
# robots (docs/server.md, "Shared memory in a container", says how to size it). Arguments
# after the image name are `vla-client serve` options (--policy, --port, --api-servers ...).

ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

# The package's extras to install: `server` serves the built-in policies; add `torch` for
# `--policy torch` or a torch policy of your own (on a CUDA base, with PIP_INDEX_URL below
# pointing at the matching torch wheels, e.g. https://download.pytorch.org/whl/cu124).
ARG EXTRAS=server
ARG PIP_EXTRA_INDEX_URL=""

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_EXTRA_INDEX_URL=${PIP_EXTRA_INDEX_URL} \
    PATH=/opt/venv/bin:${PATH}

# A CUDA base has no Python: take the distribution's (python:*-slim already has one).
RUN if ! command -v python3 >/dev/null; then \
        apt-get update \
        && apt-get install -y --no-install-recommends python3 python3-venv \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/venv

WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install ".[${EXTRAS}]" && rm -rf /src

# Not root: the server needs no privilege, and a policy's code runs in it.
RUN useradd --create-home --uid 10001 vla
USER vla
WORKDIR /home/vla

EXPOSE 8000
# The server writes the port it listens on to /home/vla/serve.port, so the health check probes
# that port, also after `docker run IMAGE --port 9000`.
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s \
    CMD python -c "import pathlib, urllib.request; port = int(pathlib.Path('/home/vla/serve.port').read_text()); urllib.request.urlopen(f'http://127.0.0.1:{port}/health')"
# Every interface, since the container's own is what the host forwards to; set an API key
# (VLA_CLIENT_API_KEY) on any network other than your own machine (docs/security.md).
ENTRYPOINT ["vla-client", "serve", "--host", "0.0.0.0", "--port-file", "/home/vla/serve.port"]

#!/usr/bin/env bash
# The second venv for the LeRobot tests (tests/lerobot_policy/, tests/lerobot_robot/), made by the
# recipe docs/install.md#lerobot gives users, line for line (tests/test_lerobot_recipe.py checks
# that they agree). LeRobot 0.4.4 pins torch<2.11, opencv-python-headless<4.13, rerun-sdk<0.27
# and torchvision<0.26, so `pip install 'vla-client[lerobot]'` would pull CUDA torch and move
# ours back: torch comes first, the CPU build from PyTorch's index, and lerobot goes in with
# --no-deps beside the dependencies it uses (pyserial: `lerobot.policies` imports lerobot.motors
# through lerobot.configs.train).
# TORCH_INDEX replaces PyTorch's CPU index where that cannot be reached (.ci/run: CI's machines
# reach PyPI only, whose torch is the CUDA build; it runs on a CPU as well).
# Usage: .ci/lerobot_venv.sh DIR   (DIR/bin/python then runs `pytest tests/lerobot_policy tests/lerobot_robot`)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:?usage: .ci/lerobot_venv.sh DIR}
python3 -m venv "$venv"
pip() { "$venv/bin/pip" "$@" --quiet; }
# the recipe
pip install "torch==2.14.1" "torchvision==0.29.1" --index-url "${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
pip install --no-deps "lerobot==0.4.4" "torchcodec==0.14.0"
pip install datasets diffusers "huggingface-hub<0.36" accelerate einops av jsonlines \
    "draccus==0.10.0" gymnasium deepdiff termcolor "imageio[ffmpeg]" "pyserial>=3.5,<4"
# end of the recipe; then this checkout and what the tests use (LeRobot's own gRPC PolicyServer)
pip install -e ".[server,websocket]" pytest pytest-timeout hypothesis \
    "grpcio==1.73.1" "protobuf==6.31.1"

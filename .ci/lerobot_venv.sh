#!/usr/bin/env bash
# The second venv for the LeRobot tests (tests/lerobot_policy/, tests/lerobot_robot/): LeRobot 0.4.4 pins torch<2.11, which
# PyPI's wheels for this machine meet only with torch 2.14.1 + torchvision 0.29.1 (both on this
# machine's disk for Python 3.11); lerobot itself goes in with --no-deps and the dependencies
# it uses, so its pins (opencv-python-headless<4.13, torch<2.11) do not move ours (pyserial:
# `lerobot.policies` imports lerobot.motors through lerobot.configs.train).
# Usage: .ci/lerobot_venv.sh DIR   (DIR/bin/python then runs `pytest tests/lerobot_policy tests/lerobot_robot`)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:?usage: .ci/lerobot_venv.sh DIR}
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet "torch==2.14.1" "torchvision==0.29.1"
"$venv/bin/pip" install --quiet --no-deps "lerobot==0.4.4" "torchcodec==0.14.0"
"$venv/bin/pip" install --quiet datasets diffusers "huggingface-hub<0.36" accelerate einops av \
    jsonlines "draccus==0.10.0" gymnasium deepdiff termcolor "imageio[ffmpeg]" \
    "grpcio==1.73.1" "protobuf==6.31.1" "pyserial>=3.5,<4"
"$venv/bin/pip" install --quiet -e ".[server,websocket]" pytest pytest-timeout hypothesis

"""The LeRobot install the docs give is the one CI's LeRobot venv is made with (issue 45, item 7).

``pip install 'vla-client[lerobot]'`` took LeRobot's pins along (CUDA torch, older OpenCV and
rerun-sdk); the venv that worked was made by a CI script the docs did not show. The recipe is
now in docs/install.md#lerobot, and .ci/lerobot_venv.sh runs its commands line for line: CI
builds that venv and runs the LeRobot tests in it (no venv is built here; it is heavy).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def commands(text: str) -> list[list[str]]:
    """The shell commands of `text`, continuation lines joined, each split as the shell does."""
    joined = text.replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if line.strip()]


def documented() -> list[list[str]]:
    page = (ROOT / "docs" / "install.md").read_text()
    marker = "<!-- the recipe .ci/lerobot_venv.sh runs: tests/test_lerobot_recipe.py -->"
    found = re.findall(re.escape(marker) + r"\n```bash\n(.*?)```", page, flags=re.S)
    assert len(found) == 1, "docs/install.md has one marked recipe"
    return commands(found[0])


def scripted() -> list[list[str]]:
    """The recipe's lines of .ci/lerobot_venv.sh, its torch index as the script's default."""
    script = (ROOT / ".ci" / "lerobot_venv.sh").read_text()
    recipe = script.split("# the recipe\n", 1)[1].split("# end of the recipe", 1)[0]
    return commands(recipe.replace('"${TORCH_INDEX:-' + CPU_INDEX + '}"', CPU_INDEX))


def test_the_documented_recipe_is_what_ci_runs() -> None:
    assert documented() == scripted()
    script = (ROOT / ".ci" / "lerobot_venv.sh").read_text()
    assert 'pip() { "$venv/bin/pip" "$@" --quiet; }' in script  # `pip` is the venv's


def test_the_recipe_takes_cpu_torch_and_lerobot_without_its_pins() -> None:
    recipe = documented()
    torch = next(words for words in recipe if any(w.startswith("torch==") for w in words))
    assert torch[torch.index("--index-url") + 1] == CPU_INDEX
    lerobot = next(words for words in recipe if "lerobot==0.4.4" in words)
    assert "--no-deps" in lerobot
    assert not any("vla-client[" in word and "lerobot" in word for w in recipe for word in w)


def test_every_page_that_installs_lerobot_points_at_the_recipe() -> None:
    from vla_client.lerobot.dataset import INSTALL

    assert "docs/install.md#lerobot" in INSTALL and "CPU torch" in INSTALL
    for page in ("server.md", "cli.md"):
        text = (ROOT / "docs" / page).read_text()
        assert "install.md#lerobot" in text, page
        assert 'pip install "vla-client[server,lerobot]"' not in text, page

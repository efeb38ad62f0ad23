"""``--help`` for every command: a description, plain text, every default shown."""

from __future__ import annotations

import argparse
import re

import pytest

from vla_client.cli import build_parser


def commands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_is_listed_with_a_summary(cli):
    run = cli("--help")
    assert run.code == 0
    for name in commands():
        assert re.search(rf"^    {name} +\S", run.out, re.MULTILINE), run.out


@pytest.mark.parametrize("name", sorted(commands()))
def test_help_has_a_description_in_plain_text(cli, name):
    run = cli(name, "--help")
    assert run.code == 0
    description = run.out.split("\n\n")[1]  # usage, blank line, description
    assert len(description) > 20 and not description.startswith(("positional", "options"))
    assert "`" not in run.out  # no reStructuredText literals
    assert f"vla-client {name}:" not in description  # the usage line already names it


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_default_is_shown(name):
    parser = commands()[name]
    text = parser.format_help()
    blocks = re.split(r"\n(?=  -)", text)  # one block per option, from its flags to its help
    for action in parser._actions:
        default = action.default
        if not action.option_strings or default in (None, [], argparse.SUPPRESS):
            continue
        if isinstance(default, bool):
            continue
        block = next(b for b in blocks if b.lstrip().startswith(action.option_strings[0]))
        assert "default" in block, block

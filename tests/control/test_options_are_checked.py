"""The safety gate's and the watchdog's modes are checked when given, never guessed.

A mode that is misspelt ("Stop", "rejct") must not quietly become a milder one: the watchdog
would otherwise keep playing a stale chunk, the gate clip what it was told to refuse.
"""

from __future__ import annotations

import pytest

from vla_client.control import SafetyGate, Watchdog


@pytest.mark.parametrize("behaviour", ["Stop", "halt", "", "finish"])
def test_an_unknown_watchdog_behaviour_is_refused(behaviour: str) -> None:
    with pytest.raises(ValueError) as caught:
        Watchdog(0.5, behaviour)  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"behaviour must be one of 'hold', 'zero', 'stop', 'finish_chunk'; got {behaviour!r}"
    )


@pytest.mark.parametrize("option", ["on_bounds", "on_delta"])
@pytest.mark.parametrize("mode", ["Reject", "clamp", ""])
def test_an_unknown_safety_mode_is_refused(option: str, mode: str) -> None:
    with pytest.raises(ValueError) as caught:
        SafetyGate(**{option: mode})  # type: ignore[arg-type]
    assert str(caught.value) == f"{option} must be one of 'clip', 'reject'; got {mode!r}"


def test_the_known_modes_are_taken() -> None:
    for behaviour in ("hold", "zero", "stop", "finish_chunk"):
        assert Watchdog(0.5, behaviour).behaviour == behaviour  # type: ignore[arg-type]
    for mode in ("clip", "reject"):
        SafetyGate(on_bounds=mode, on_delta=mode)  # type: ignore[arg-type]

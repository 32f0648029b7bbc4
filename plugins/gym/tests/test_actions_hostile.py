"""`parse_action` on replies made to be slow: each is read in time linear in its length, with the documented answer.

A negation rules out the action words after it to the end of its clause; the spans used to be
found with one search per negation and checked with a scan per action word, so a reply of
negations was quadratic ("not " * 20,000, 80 kB: 18 s; "not left " * 20,000: 49 s, on the 2-core
development VM) and the env's worker spent that long on one step. A reply longer than
`MAX_TEXT` is read from its end.
"""

from __future__ import annotations

import time

import pytest
from beyondagent_plugin_gym.actions import MAX_TEXT, ParsedAction, parse_action
from beyondagent_plugin_gym.frozenlake import FrozenLake

LAKE = (FrozenLake.actions, FrozenLake.synonyms)  # left, down, right, up
BUDGET_S = 1.0  # each takes ~0.05 s here; the quadratic reading took 18-49 s on the first two

HOSTILE = [
    pytest.param("not " * 20_000, ParsedAction(None, "no action found"), id="negations"),
    pytest.param("not left " * 20_000, ParsedAction(None, "no action found (only ruled out: left)"),
                 id="negated actions"),
    pytest.param("not left, " * 20_000 + "right", ParsedAction(2), id="a clause per negation, then an action"),
    pytest.param("don't go left but " * 10_000 + "up", ParsedAction(3), id="negations cut by but"),
    pytest.param("<answer>" * 20_000, ParsedAction(None, "no action found inside <answer>"), id="unclosed tags"),
    pytest.param("Action: " * 20_000, ParsedAction(None, "no action found after 'Action:'"), id="empty labels"),
    pytest.param("7" * 200_000, ParsedAction(None, "7777777777... is not an action number (0-3)"), id="one huge number"),
]


@pytest.mark.parametrize(("text", "expected"), HOSTILE)
def test_a_reply_made_to_be_slow_is_read_in_linear_time(text: str, expected: ParsedAction) -> None:
    started = time.perf_counter()
    parsed = parse_action(text, *LAKE)
    took = time.perf_counter() - started
    assert parsed == expected
    assert took < BUDGET_S, f"{len(text):,} characters took {took:.2f} s"


def test_a_runaway_reply_is_read_from_its_end() -> None:
    text = "I will think. " * 400_000 + "\nAction: down"  # 5.6 MB, past what the env service accepts
    started = time.perf_counter()
    parsed = parse_action(text, *LAKE)
    assert parsed == ParsedAction(1) and time.perf_counter() - started < BUDGET_S
    assert parse_action("Action: up\n" + "x" * MAX_TEXT, *LAKE) == ParsedAction(None, "no action found")

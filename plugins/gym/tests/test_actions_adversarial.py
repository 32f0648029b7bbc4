"""`parse_action` against replies a real model writes, or a policy would drift into: the documented reading.

Each row is one reply, the game, and what the parser must make of it: an action index, or
None with the problem the env shows the model. The rules are in `actions.py`'s docstring.
"""

from __future__ import annotations

import pytest
from beyondagent_plugin_gym.actions import parse_action
from beyondagent_plugin_gym.cliffwalking import CliffWalking
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_gym.taxi import Taxi

LAKE = (FrozenLake.actions, FrozenLake.synonyms)  # left, down, right, up
TAXI = (Taxi.actions, Taxi.synonyms)  # south, north, east, west, pickup, dropoff
CLIFF = (CliffWalking.actions, CliffWalking.synonyms)  # up, right, down, left


def row(what: str, text: str, expected: int | None, problem: str | None = None, game=LAKE):
    return pytest.param(text, game, expected, problem, id=what)


ROWS = [
    # --- every action, several actions ------------------------------------------------------
    row("lists every action", "left down right up", None, "names more than one action: left, down, right, up"),
    row("lists every action after the label", "Action: left, down, right or up", None,
        "names more than one action after 'Action:': left, down, right, up"),
    row("every Taxi action", "south north east west pickup dropoff", None,
        "names more than one action: south, north, east, west, pickup, dropoff", TAXI),
    row("two moves for one turn", "Action: left then down", None,
        "names more than one action after 'Action:': left, down"),
    row("a plan of moves", "I will go down, then right, then down.", None, "names more than one action: down, right"),
    row("the same move three times is one move", "left left left", 0),
    row("the last label wins", "Action: left\nAction: right", 2),
    row("the last tag wins", "<answer>up</answer><answer>down</answer>", 1),
    # --- negation ---------------------------------------------------------------------------
    row("don't go left", "don't go left", None, "no action found (only ruled out: left)"),
    row("do not go left, go right", "Do not go left, go right.", 2),
    row("not up; go down", "Not up; go down.", 1),
    row("avoid down", "avoid down", None, "no action found (only ruled out: down)"),
    row("never up", "Never go up", None, "no action found (only ruled out: up)"),
    row("won't go left but right", "I won't go left but right", 2),
    row("can't go up, so left", "I can't go up, so left", 0),
    row("instead of", "go right instead of left", 2),
    row("neither of two", "Not up or down.", None, "no action found (only ruled out: up, down)"),
    row("a negated action after the label", "Action: not left", None,
        "no action found after 'Action:' (only ruled out: left)"),
    row("the hole is below: avoid down, then the label", "The hole is below me, so I avoid down.\nAction: right", 2),
    # --- action words inside other words ----------------------------------------------------
    row("leftover, alright, upward", "leftover alright upward", None, "no action found"),
    row("a hyphenated word", "the left-hand side", None, "no action found"),
    row("up-to-date", "my map is up-to-date", None, "no action found"),
    row("an identifier", "move_left", None, "no action found"),
    row("a possessive", "the left's edge", None, "no action found"),
    row("download and rightmost", "download the rightmost file", None, "no action found"),
    row("a synonym inside a word", "Eastern Westerly", None, "no action found", TAXI),
    row("pick up as one word", "Pick-Up the passenger", 4, game=TAXI),
    row("bold, quoted, bracketed", "**'[left]'**", 0),
    # --- numbers ----------------------------------------------------------------------------
    row("a restated position is not an action number", "You are at row 1, column 1.", None, "no action found"),
    row("a restated position with one number", "I am at row 2.", None, "no action found"),
    row("a number among words", "move 2", None, "no action found"),
    row("a bare number", "2", 2),
    row("a number with a full stop", "2.", 2),
    row("a number among symbols", "**[2]** !", 2),
    row("a number after a control character", "\x1a3", 3),
    row("two numbers", "1 2", None, "names more than one action number: 1, 2"),
    row("a number after the label", "Action: 3", 3),
    row("a number in a tag", "<answer> 0 </answer>", 0),
    row("a negative number", "-1", None, "-1 is not an action number (0-3)"),
    row("a signed number", "+1", None, "+1 is not an action number (0-3)"),
    row("a decimal", "1.5", None, "no action found"),
    row("a huge number", "9" * 5000, None, "9999999999... is not an action number (0-3)"),
    row("a number out of range", "4", None, "4 is not an action number (0-3)"),
    row("unicode digits are not action numbers", "\u0661", None, "no action found"),
    row("a word wins over a number", "Action: left (0)", 0),
    # --- labels and tags ---------------------------------------------------------------------
    row("the action on the line after the label", "Action:\nright", 2),
    row("an empty label at the end", "I think.\nAction:", None, "no action found after 'Action:'"),
    row("an empty tag, the action outside", "<answer></answer> left", None, "no action found inside <answer>"),
    row("the label wins over the prose", "Going left. Action: up", 3),
    # --- what the env says is not the model's action ---------------------------------------
    row("a claim of success", "I reached the goal! Reward: 1", None, "no action found"),
    row("an empty reply", "", None, "no action found"),
    row("noise", "xyz ### ...", None, "no action found"),
    row("fullwidth letters are not words it knows", "\uff4c\uff45\uff46\uff54", None, "no action found"),
    # --- plain answers still read ----------------------------------------------------------
    row("a word", "left", 0),
    row("a word in a sentence", "I will move left.", 0),
    row("a synonym", "west", 0),
    row("any case", "LEFT", 0),
    row("CliffWalking's order", "Action: left", 3, game=CLIFF),
    row("Taxi's synonym", "left", 3, game=TAXI),
    row("Taxi: drop off, negated pick up", "Don't pick up; drop off.", 5, game=TAXI),
]


@pytest.mark.parametrize(("text", "game", "expected", "problem"), ROWS)
def test_adversarial_answer(text: str, game, expected: int | None, problem: str | None) -> None:
    parsed = parse_action(text, *game)
    assert (parsed.index, parsed.problem) == (expected, problem)


def test_the_table_is_large_and_mixed() -> None:
    assert len(ROWS) >= 50
    assert sum(1 for param in ROWS if param.values[2] is None) >= 25

"""The action parser: what models write, read the documented way (see `actions.py`)."""

from __future__ import annotations

import pytest
from beyondagent_plugin_gym.actions import parse_action
from beyondagent_plugin_gym.cliffwalking import CliffWalking
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_gym.taxi import Taxi

LAKE = (FrozenLake.actions, FrozenLake.synonyms)  # left, down, right, up
TAXI = (Taxi.actions, Taxi.synonyms)  # south, north, east, west, pickup, dropoff
CLIFF = (CliffWalking.actions, CliffWalking.synonyms)  # up, right, down, left


@pytest.mark.parametrize(
    ("text", "game", "expected"),
    [
        # plain words, any case, inside a sentence
        ("left", LAKE, 0),
        ("LEFT", LAKE, 0),
        ("  Up \n", LAKE, 3),
        ("I will move left.", LAKE, 0),
        ("left, left!", LAKE, 0),
        ("west", LAKE, 0),
        ("Go NORTH", LAKE, 3),
        # tags and labels
        ("Action: LEFT", LAKE, 0),
        ("<answer>left</answer>", LAKE, 0),
        ("<answer> DOWN </answer>", LAKE, 1),
        ("**Action:** right", LAKE, 2),
        ("action = up", LAKE, 3),
        ("The hole is below me, so I avoid down.\nAction: right", LAKE, 2),
        ("Maybe left... <answer>right</answer>", LAKE, 2),
        ("<answer>left</answer> then <answer>up</answer>", LAKE, 3),
        ("<answer>up", LAKE, 3),
        ("Final answer: down", LAKE, 1),
        # gymnasium indices
        ("1", LAKE, 1),
        ("2.", LAKE, 2),
        ("Action: 3", LAKE, 3),
        ("<answer>0</answer>", LAKE, 0),
        ("Action: left (0)", LAKE, 0),  # a word wins over a number
        ("Action: right (0)", LAKE, 2),
        # each game's own names and order
        ("1", CLIFF, 1),
        ("Action: left", CLIFF, 3),
        ("north", TAXI, 1),
        ("left", TAXI, 3),
        ("pick up", TAXI, 4),
        ("Pick-Up the passenger", TAXI, 4),
        ("I should drop off the passenger now.", TAXI, 5),
        ("Action: dropoff", TAXI, 5),
        ("5", TAXI, 5),
    ],
)
def test_reads_one_action(text: str, game, expected: int) -> None:
    parsed = parse_action(text, *game)
    assert (parsed.index, parsed.problem) == (expected, None)


@pytest.mark.parametrize(
    ("text", "game", "problem"),
    [
        ("xyz", LAKE, "no action found"),
        ("", LAKE, "no action found"),
        ("leftover alright upward", LAKE, "no action found"),  # whole words only
        ("1.5", LAKE, "no action found"),
        ("left or right?", LAKE, "names more than one action: left, right"),
        ("Not up; go down, or left.", LAKE, "names more than one action: down, left"),
        ("pick up then go up", TAXI, "names more than one action: pickup, north"),
        ("Going left. Action: jump", LAKE, "no action found after 'Action:'"),  # the label wins
        ("<answer></answer> left", LAKE, "no action found inside <answer>"),
        ("<answer>left or up</answer>", LAKE, "names more than one action inside <answer>: left, up"),
        ("7", LAKE, "7 is not an action number (0-3)"),
        ("6", TAXI, "6 is not an action number (0-5)"),
        ("1 or 2", LAKE, "no action found"),  # a number counts only on its own
        ("move 2", LAKE, "no action found"),
        ("I am at row 0, column 1.", LAKE, "no action found"),
        ("-1", LAKE, "-1 is not an action number (0-3)"),
        ("don't go left", LAKE, "no action found (only ruled out: left)"),
    ],
)
def test_rejects_invalid_and_ambiguous_answers(text: str, game, problem: str) -> None:
    parsed = parse_action(text, *game)
    assert parsed.index is None
    assert parsed.problem == problem


def test_synonyms_must_name_actions() -> None:
    with pytest.raises(ValueError, match="unknown actions: jump"):
        parse_action("hop", ("left", "right"), {"hop": "jump"})

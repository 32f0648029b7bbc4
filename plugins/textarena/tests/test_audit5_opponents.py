"""The random opponent's moves are legal and drawn from every legal move (opponents.py; issue 37's
fifth mutation audit): random against random in each game it plays, over many seeds, the game never
refuses a move and every game ends with a result; and the opponent's moves cover every free cell,
open column and pile size, not only some of them. Real TextArena games (offline)."""

from __future__ import annotations

import random

import pytest
from beyondagent_plugin_textarena.config import FREE_TEXT, TWO_PLAYER
from beyondagent_plugin_textarena.games import make_game, new_text, to_move
from beyondagent_plugin_textarena.opponents import random_move


@pytest.mark.parametrize("game", sorted(TWO_PLAYER - FREE_TEXT))
def test_random_against_random_never_makes_an_invalid_move(game: str) -> None:
    for seed in range(6):
        env, rng, done = make_game(game, "", seed), random.Random(seed), False
        for _ in range(200):
            done, _ = env.step(random_move(game, env, new_text(env, to_move(env)), rng))
            assert env.state.error_count == 0, (game, seed)  # the game accepted the move
            if done:
                break
        rewards, info = env.close()
        assert done and set(rewards) == {0, 1}, (game, seed)
        assert not any(player.get("invalid_move") for player in info.values()), (game, seed, info)


def test_a_full_column_is_never_chosen_and_the_others_all_are() -> None:
    env = make_game("connectfour", "", 0)
    board = env.state.game_state["board"]
    for row in range(len(board)):  # column 2 full, column 5 with one piece at the bottom
        board[row][2] = "X" if row % 2 else "O"
    board[-1][5] = "X"
    rng = random.Random(0)
    chosen = {random_move("connectfour", env, "", rng) for _ in range(300)}
    assert chosen == {f"[col {col}]" for col in range(len(board[0])) if col != 2}


def test_nim_takes_between_one_and_the_whole_pile_from_a_pile_that_has_some() -> None:
    env = make_game("nim", "", 0)
    env.state.game_state["piles"] = [0, 3, 0]
    rng = random.Random(0)
    assert {random_move("nim", env, "", rng) for _ in range(300)} == {"[1 1]", "[1 2]", "[1 3]"}

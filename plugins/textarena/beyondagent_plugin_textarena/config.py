"""The games this plugin serves and the settings of its env and task source (imported when plugins
are listed: nothing of textarena here).

Only TextArena's one-player games that play offline are served. Its word games need nltk's `words`
corpus (a download) and its two-player games need seats for two agents (not yet in the core's
episode contract); both are refused with the reason (`check_game`).
"""

from __future__ import annotations

import attrs

from beyondagent_core.checks import number

# our name -> (TextArena's id, its difficulties: "" is the game's default)
GAMES: dict[str, tuple[str, tuple[str, ...]]] = {
    "sokoban": ("Sokoban-v0", ("", "medium")),
    "minesweeper": ("Minesweeper-v0", ("", "small", "medium", "hard")),
    "sudoku": ("Sudoku-v0", ("", "very-easy", "easy", "medium", "hard")),
    "tower_of_hanoi": ("TowerOfHanoi-v0", ("", "medium", "hard", "hardcore", "extreme")),
    "fifteen_puzzle": ("FifteenPuzzle-v0", ("",)),
    "guess_the_number": ("GuessTheNumber-v0", ("", "hardcore")),
    "mastermind": ("Mastermind-v0", ("", "hard", "extreme")),
}
# games TextArena has that are not served here, and why
REFUSED: dict[str, str] = {
    **{name: "it needs nltk's `words` corpus, a download" for name in (
        "wordle", "hangman", "wordladder", "wordsearch", "crosswords", "spellingbee", "anagram")},
    **{name: "it is a two-player game: seats for two agents are not in the episode contract yet (issue 39)"
       for name in ("tictactoe", "connectfour", "kuhnpoker", "nim", "simplenegotiation",
                    "iteratedprisonersdilemma", "chess")},
}
SPLITS = ("train", "val", "test")
SPLIT_SIZE = 1_000_000
MAX_ACTION_CHARS = 100_000
SEEDS_WHY = f"meaning: a split has {SPLIT_SIZE:,} seeds"


def check_game(game: str, difficulty: str) -> None:
    """A ValueError naming the served games (or why `game` is not one) for an unknown game or difficulty."""
    if game not in GAMES:
        why = REFUSED.get(game.replace("_", "").lower())
        if why:
            raise ValueError(f"game {game!r} is not served: {why}")
        raise ValueError(f"unknown game {game!r}; the games served are {', '.join(GAMES)}")
    difficulties = GAMES[game][1]
    if difficulty not in difficulties:
        shown = ", ".join(repr(d) for d in difficulties)
        raise ValueError(f"game {game!r} has the difficulties {shown} ('' is the game's default), not {difficulty!r}")


@attrs.define
class TextArenaConfig:
    """`env: {name: textarena}`: the game a task plays when the task does not name one (its metadata's
    `game` and `difficulty` win), the longest reply passed to the game (the rest is cut: the games
    read the move in square brackets), and the most turns an episode may take (None: the game's own
    limit)."""

    game: str = "tower_of_hanoi"
    difficulty: str = ""
    max_action_chars: int = attrs.field(default=2000, validator=number(
        ge=1, le=MAX_ACTION_CHARS, why="time: the games parse a reply with regular expressions; a move is short"))
    max_steps: int | None = attrs.field(default=None, validator=number(ge=1, le=10_000, why="time: turns of one game"))
    tasks_per_split: int = attrs.field(default=1000, validator=number(ge=1, le=SPLIT_SIZE, why=SEEDS_WHY))

    def __attrs_post_init__(self) -> None:
        check_game(self.game, self.difficulty)


@attrs.define
class TextArenaTasksConfig:
    """`textarena_tasks`: `count` seeded games of `game` (at `difficulty`) from `split`'s seed range,
    from index `start` on."""

    game: str = "tower_of_hanoi"
    difficulty: str = ""
    split: str = attrs.field(default="train", validator=attrs.validators.in_(SPLITS))
    count: int = attrs.field(default=100, validator=number(ge=1, le=SPLIT_SIZE, why=SEEDS_WHY))
    start: int = attrs.field(default=0, validator=number(ge=0, le=SPLIT_SIZE - 1, why=SEEDS_WHY))

    def __attrs_post_init__(self) -> None:
        check_game(self.game, self.difficulty)
        if self.start + self.count > SPLIT_SIZE:
            raise ValueError(f"start + count must be at most {SPLIT_SIZE:,} (a split's seeds), got "
                             f"{self.start + self.count:,}")

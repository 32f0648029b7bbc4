"""The games this plugin serves and the settings of its env and task source (imported when plugins
are listed: nothing of textarena here).

TextArena's one-player games that play offline are served, and two-player games against an opponent
inside the env (`opponents.py`): a random legal move (TicTacToe, Connect Four, Nim, Kuhn Poker) or an
LLM at any OpenAI-compatible endpoint (those, and the games whose moves are free text: SimpleNegotiation,
the iterated prisoner's dilemma with its chat). Its word games need nltk's `words` corpus (a download) and
chess a newer Python: refused with the reason (`check_game`).
"""

from __future__ import annotations

import attrs

from beyondagent_core.checks import number
from beyondagent_core.llm_config import LLMConfig
from beyondagent_plugin_textarena.opponents import OPPONENTS

# our name -> (TextArena's id, its difficulties: "" is the game's default)
GAMES: dict[str, tuple[str, tuple[str, ...]]] = {
    "sokoban": ("Sokoban-v0", ("", "medium")),
    "minesweeper": ("Minesweeper-v0", ("", "small", "medium", "hard")),
    "sudoku": ("Sudoku-v0", ("", "very-easy", "easy", "medium", "hard")),
    "tower_of_hanoi": ("TowerOfHanoi-v0", ("", "medium", "hard", "hardcore", "extreme")),
    "fifteen_puzzle": ("FifteenPuzzle-v0", ("",)),
    "guess_the_number": ("GuessTheNumber-v0", ("", "hardcore")),
    "mastermind": ("Mastermind-v0", ("", "hard", "extreme")),
    # two players: the policy against the env's opponent (TextArenaConfig.opponent)
    "tictactoe": ("TicTacToe-v0", ("",)),
    "connectfour": ("ConnectFour-v0", ("",)),
    "nim": ("Nim-v0", ("",)),
    "kuhnpoker": ("KuhnPoker-v0", ("",)),
    "simplenegotiation": ("SimpleNegotiation-v0", ("",)),
    "iteratedprisonersdilemma": ("IteratedPrisonersDilemma-v0", ("",)),
}
# free-text moves (offers, chat): no legal-move list for the random opponent; the players read each other's text
FREE_TEXT = frozenset({"simplenegotiation", "iteratedprisonersdilemma"})
TWO_PLAYER = frozenset({"tictactoe", "connectfour", "nim", "kuhnpoker"}) | FREE_TEXT
# games TextArena has that are not served here, and why
REFUSED: dict[str, str] = {
    **{name: "it needs nltk's `words` corpus, a download" for name in (
        "wordle", "hangman", "wordladder", "wordsearch", "crosswords", "spellingbee", "anagram")},
    "chess": "TextArena's chess needs Python 3.12 or newer",
}
SPLITS = ("train", "val", "test")
SPLIT_SIZE = 1_000_000
MAX_ACTION_CHARS = 100_000
SEEDS_WHY = f"meaning: a split has {SPLIT_SIZE:,} seeds"


def check_opponent(game: str, opponent: str, config: TextArenaConfig | None = None) -> None:
    """A ValueError when `opponent` cannot play `game` (the random one has no move list for free text; the
    llm one needs the env's `opponent_llm`)."""
    if opponent not in OPPONENTS:
        raise ValueError(f"unknown opponent {opponent!r}; the opponents are {', '.join(OPPONENTS)}")
    if game in FREE_TEXT and opponent == "random":
        raise ValueError(f"game {game!r} is played in free text (offers, chat): the random opponent cannot play it; "
                         "set the env's opponent: llm and opponent_llm: {model: ..., base_url: ...}, or self")
    if opponent == "llm" and config is not None and (config.opponent_llm is None or not config.opponent_llm.model):
        raise ValueError("opponent llm needs the env's opponent_llm: {model: ..., base_url: ...} (an "
                         "OpenAI-compatible endpoint)")


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
    limit). A two-player game is played against `opponent` (`random`: a random legal move; `llm`: the
    model at `opponent_llm`, any OpenAI-compatible endpoint, shown the game as its seat sees it), the
    policy in seat `seat` (0 moves first; None: 0 on even seeds, 1 on odd ones, so a task set plays
    both seats). `opponent: self` is self-play: the policy plays both seats, each its own sequence and
    reward (a backend that trains multi-seat episodes: torch). A task's metadata `opponent` wins."""

    game: str = "tower_of_hanoi"
    difficulty: str = ""
    max_action_chars: int = attrs.field(default=2000, validator=number(
        ge=1, le=MAX_ACTION_CHARS, why="time: the games parse a reply with regular expressions; a move is short"))
    max_steps: int | None = attrs.field(default=None, validator=number(ge=1, le=10_000, why="time: turns of one game"))
    tasks_per_split: int = attrs.field(default=1000, validator=number(ge=1, le=SPLIT_SIZE, why=SEEDS_WHY))
    opponent: str = attrs.field(default="random", validator=attrs.validators.in_(OPPONENTS))
    seat: int | None = attrs.field(default=None, validator=number(
        ge=0, le=1, why="meaning: a two-player game has the seats 0 and 1"))
    opponent_llm: LLMConfig | None = None

    def __attrs_post_init__(self) -> None:
        check_game(self.game, self.difficulty)
        if self.opponent == "llm" and (self.opponent_llm is None or not self.opponent_llm.model):
            raise ValueError("opponent llm needs opponent_llm: {model: ..., base_url: ...} (an OpenAI-compatible "
                             "endpoint)")
        if self.opponent == "self" and self.seat is not None:
            raise ValueError("seat is set but the opponent is self: in self-play the policy plays every seat; "
                             "remove seat")
        if self.opponent_llm is not None and self.opponent != "llm":
            raise ValueError(f"opponent_llm is set but the opponent is {self.opponent!r}: set opponent: llm, "
                             "or remove opponent_llm")
        check_opponent(self.game, self.opponent)


@attrs.define
class TextArenaTasksConfig:
    """`textarena_tasks`: `count` seeded games of `game` (at `difficulty`) from `split`'s seed range,
    from index `start` on; `opponent`, when set, is the tasks' own (their metadata's: it wins over the
    env's), so one env can train in self-play and validate against the random opponent."""

    game: str = "tower_of_hanoi"
    difficulty: str = ""
    split: str = attrs.field(default="train", validator=attrs.validators.in_(SPLITS))
    count: int = attrs.field(default=100, validator=number(ge=1, le=SPLIT_SIZE, why=SEEDS_WHY))
    start: int = attrs.field(default=0, validator=number(ge=0, le=SPLIT_SIZE - 1, why=SEEDS_WHY))
    opponent: str | None = attrs.field(default=None, validator=attrs.validators.optional(
        attrs.validators.in_(OPPONENTS)))

    def __attrs_post_init__(self) -> None:
        check_game(self.game, self.difficulty)
        if self.opponent is not None:
            if self.game not in TWO_PLAYER:
                raise ValueError(f"opponent is set but {self.game!r} is a one-player game; remove opponent")
            check_opponent(self.game, self.opponent)
        if self.start + self.count > SPLIT_SIZE:
            raise ValueError(f"start + count must be at most {SPLIT_SIZE:,} (a split's seeds), got "
                             f"{self.start + self.count:,}")

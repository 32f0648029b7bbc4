"""TextArena, imported quietly, and one seeded game made from our name for it.

`import textarena` imports every game module and some of them print (or try an nltk download) at
import; what they print goes to the debug log, not to the run's output. Games are made from their
`-raw` registration: without TextArena's LLM wrappers, whose observation is the whole history as one
string. The raw game returns only what is new since the last look, as (sender, text, kind) entries.
"""

from __future__ import annotations

import contextlib
import functools
import io
import sys
import threading
from typing import Any

from beyondagent_core.logs import get_logger
from beyondagent_plugin_textarena.config import GAMES, TWO_PLAYER, check_game

log = get_logger("beyondagent.textarena")


_IMPORT = threading.Lock()


@functools.cache
def textarena() -> Any:
    """The `textarena` module, imported once, its import's output logged at debug level.

    Under a lock: envs reset in several threads at once, and `redirect_stdout` swaps the process's
    `sys.stdout`; two first calls at once would each restore what the other set, leaving the run's
    stdout (its logs, progress bars, eval tables) going into a buffer nobody reads."""
    with _IMPORT:
        if "textarena" in sys.modules:
            return sys.modules["textarena"]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            import textarena
    if printed.getvalue().strip():
        log.debug("textarena.import_output", output=printed.getvalue().strip()[:2000])
    return textarena


def game_id(game: str, difficulty: str) -> str:
    """TextArena's id of `game` at `difficulty`, raw (unwrapped): `Sokoban-v0-medium-raw`."""
    check_game(game, difficulty)
    base = GAMES[game][0]
    return f"{base}-{difficulty}-raw" if difficulty else f"{base}-raw"


def make_game(game: str, difficulty: str, seed: int) -> Any:
    """A TextArena game reset with `seed` for its players (two for a two-player game, else one)."""
    ta = textarena()
    env = ta.make(game_id(game, difficulty))
    env.reset(num_players=2 if game in TWO_PLAYER else 1, seed=seed)
    return env


def to_move(env: Any) -> int:
    """The seat whose turn it is."""
    return int(env.state.current_player_id)


def turn_limit(env: Any) -> int | None:
    """The game's own limit on turns (`max_turns` of its state), when it has one."""
    state = getattr(env, "state", None)
    limit = getattr(state, "max_turns", None)
    return limit if isinstance(limit, int) and limit > 0 else None


def new_text(env: Any, player: int = 0, *, skip_actions: bool = True, others: bool = False) -> str:
    """What the game showed `player` since that player's last look, as one text. The raw text of the
    moves is left out: the player's own is the assistant's message already, and the game describes
    every move it accepts ("Player 1 placed their symbol (X) in cell 7."); with `others`, the other
    player's text is kept (a free-text game: its offers and chat are the move)."""
    state = env.state
    entries, state.observations[player] = state.observations[player], []  # what get_observation() does
    kinds = textarena().ObservationType

    def shown(sender: int, kind: Any) -> bool:
        return not (skip_actions and kind == kinds.PLAYER_ACTION and (not others or sender == player))

    parts = [(f"Player {sender}: " if others and kind == kinds.PLAYER_ACTION and sender != player else "")
             + str(text).strip() for sender, text, kind in entries if shown(sender, kind) and str(text).strip()]
    return "\n\n".join(parts)

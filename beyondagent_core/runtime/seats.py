"""Multi-seat episodes: one game, several players, each seat its own conversation, tokens and reward.

The env contract for them (an env with one seat says nothing and is played as always):

- `reset()`'s info says `seats` (how many players) and `seat` (who moves first); its messages are that
  seat's view;
- each `step(action)` is the move of the seat whose turn it was; its info names the `seat` that moves
  next, and its observation is what that seat sees since it last moved (the first time: all of it);
- the game over, the env's optional `seat_rewards()` gives each seat's reward, in seat order, as
  `Reward.to_dict()` dicts (plain JSON: it crosses the env service like any optional method).

A workflow plays such an episode in `run_seats(task, env, seat_llm)`: `seat_llm(k, seats=n)` is the chat
that plays seat k of an episode of n seats (the backend makes one per seat, with its own token sequence
and sampling seed; the same object every time for one seat), and it returns one `Trajectory` per seat,
`Trajectory.seat` set, each with its own turns and reward. `seats` tells a backend whose opponent plays
some seats (torch's opponent pool) which seat the policy has; a workflow that does not say has the
policy in every seat. The react workflow does (`ReactWorkflow.run_seats`). A backend that
trains multi-seat episodes calls `EpisodeRunner.run_seats`; one that trains one sequence per episode
calls `run`, and there a multi-seat env is refused with `MultiSeatRefused`, which says what to do.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from beyondagent_core.protocols import AsyncEnv, ChatLLM
from beyondagent_core.types import Reward

MAX_SEATS = 16
SeatLLM = Callable[..., ChatLLM]
"""`seat_llm(k, seats=None)`: the chat that plays seat k (of `seats`, when the workflow says)."""


class MultiSeatRefused(RuntimeError):
    """A multi-seat env was played by a workflow or backend that plays one seat."""


def told_seats(seat_llm: SeatLLM) -> SeatLLM:
    """`seat_llm` as workflows call it, `seat_llm(k, seats=n)`, also when a backend's takes only the seat
    (one written before `seats` existed: its policy plays every seat, as it did)."""
    try:
        parameters = inspect.signature(seat_llm).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable without a signature: assume the current form
        return seat_llm
    if any(p.name == "seats" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return seat_llm
    return lambda seat, seats=None: seat_llm(seat)


def seats_in(info: Mapping[str, Any] | None, where: str = "reset()") -> int:
    """How many seats the env's `reset()` info says the episode has (1 when it says nothing)."""
    seats = (info or {}).get("seats", 1)
    if isinstance(seats, bool) or not isinstance(seats, int) or not 1 <= seats <= MAX_SEATS:
        raise TypeError(f"env {where} info 'seats' must be a whole number from 1 to {MAX_SEATS}, got {seats!r}")
    return seats


def seat_in(info: Mapping[str, Any] | None, seats: int, where: str) -> int:
    """The seat whose turn it is, from an env's reset or step info: a TypeError when it names none of
    the episode's `seats`."""
    seat = (info or {}).get("seat")
    if isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < seats:
        raise TypeError(f"env {where} info 'seat' must name the seat that moves next, 0 to {seats - 1} "
                        f"(the episode has {seats} seats), got {seat!r}")
    return seat


async def seat_rewards(env: AsyncEnv, seats: int) -> list[Reward]:
    """Each seat's reward, from the env's `seat_rewards()` (checked: one Reward dict per seat)."""
    answer = await env.call("seat_rewards")
    if not isinstance(answer, list) or len(answer) != seats:
        raise TypeError(f"env seat_rewards() must return a list of {seats} Reward dicts (one per seat), got "
                        f"{type(answer).__name__} of {len(answer) if isinstance(answer, list) else '?'}")
    rewards = []
    for index, data in enumerate(answer):
        try:
            rewards.append(data if isinstance(data, Reward) else Reward.from_dict(data))
        except (TypeError, ValueError, KeyError) as exc:
            raise TypeError(f"env seat_rewards()[{index}] is not a Reward dict: {exc}") from exc
    return rewards


def refuse_seats(seats: int) -> MultiSeatRefused:
    """The error for a multi-seat env played where one seat is: what it is, and what to do."""
    return MultiSeatRefused(
        f"the env's episode has {seats} seats (a game the policy plays against itself) and this plays one seat "
        "per episode (trinity does): train it with the torch or verl backend (they train every "
        "seat), or give the env an opponent of its own (textarena: env.opponent random or llm, or the tasks' "
        "opponent, as a validation set against the random player has)")

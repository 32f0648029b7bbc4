"""The `agent` workflow's settings (`workflow: {name: agent, entrypoint: ...}`), apart from the workflow.

Listing plugins and checking a spec read this class only; the workflow (`agent.py`: asyncio, the
gateway, the agent's import) is imported when a run builds it.
"""

from __future__ import annotations

import attrs

from beyondagent_core.checks import MAX_SECONDS, MAX_TURNS, MISSING, SECONDS_WHY, TURNS_WHY, number
from beyondagent_plugin_gateway.api import MAX_N


@attrs.define
class AgentConfig:
    """`entrypoint`: "package.module:function"; `timeout`: seconds per episode; `max_calls`: model
    calls per episode (more get HTTP 429); `max_concurrent_calls`: an episode's calls in flight at
    once (more get 429); `max_n`: choices a call may ask for (`n`; more is a 400). The last two keep
    one episode from starving the others of the policy. `seats`: players of a multi-seat env the agent
    plays (self-play: each seat its own endpoint, its own samples and reward; 1: an ordinary agent)."""

    entrypoint: str = MISSING
    timeout: float = attrs.field(default=600.0, validator=number(gt=0, le=MAX_SECONDS, why=SECONDS_WHY))
    max_calls: int = attrs.field(default=100, validator=number(ge=1, le=MAX_TURNS, why=TURNS_WHY))
    max_concurrent_calls: int = attrs.field(default=4, validator=number(
        ge=1, le=64, why="time: the episode's calls in flight share the policy with every other episode"))
    max_n: int = attrs.field(default=4, validator=number(
        ge=1, le=MAX_N, why="time: the episode's choices share the policy with every other episode; 16 is what "
                            "any request may ask for"))
    seats: int = attrs.field(default=1, validator=number(ge=1, le=16, why="meaning: the seats of a game "
                                                                            "(beyondagent_core.runtime.seats)"))

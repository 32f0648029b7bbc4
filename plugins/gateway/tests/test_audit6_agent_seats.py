"""The agent workflow tells the backend how many seats its episode has (`AgentWorkflow.run_seats` asks
`seat_llm(k, seats=n)` for each of its `seats`): torch's opponent pool needs the count to know which
seats its frozen snapshot plays. The gateway run itself (`play`) is stood in for: what is checked is
what `run_seats` asks for and hands on."""

from __future__ import annotations

import asyncio
from pathlib import Path

from beyondagent_plugin_gateway.agent import AgentWorkflow
from beyondagent_plugin_gateway.config import AgentConfig

from beyondagent_core.types import Task, Trajectory

AGENT = "def run(task, llm_base_url, env, api_key):\n    return None\n"


def test_run_seats_asks_each_seats_chat_with_the_seat_count(tmp_path: Path) -> None:
    (tmp_path / "duel_agent.py").write_text(AGENT)
    for seats in (1, 2, 3):
        workflow = AgentWorkflow(AgentConfig(entrypoint=f"{tmp_path / 'duel_agent.py'}:run", seats=seats))
        asked, handed = [], []

        def seat_llm(seat: int, seats: int | None = None) -> str:
            asked.append((seat, seats))
            return f"chat {seat}"

        async def play(task, env, llms):  # the gateway run: one trajectory per chat it is given
            handed.extend(llms)
            return [Trajectory(task=task, seat=k) for k in range(len(llms))]

        workflow.play = play
        trajectories = asyncio.run(workflow.run_seats(Task("duel-1"), None, seat_llm))
        assert asked == [(seat, seats) for seat in range(seats)]
        assert handed == [f"chat {seat}" for seat in range(seats)] and len(trajectories) == seats

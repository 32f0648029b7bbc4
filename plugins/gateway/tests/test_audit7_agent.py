"""What an agent's returned number means as a Reward (audit 7): success is a score above 0 unless said.

`as_reward` turns an agent's return value into the episode's reward. A bare number (or a dict without
`success`) succeeds only when it is positive: a score of exactly 0 (nothing gained) is not a success,
while an explicit `success` wins over the sign of the score. And the limits of `workflow:` reach the
gateway episode each under its own name (`play`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from beyondagent_core.types import Reward, Task
from beyondagent_plugin_gateway.agent import AgentWorkflow, as_reward
from beyondagent_plugin_gateway.config import AgentConfig


@pytest.mark.parametrize(("value", "success"), [
    (0, False), (0.0, False), (-0.5, False), (0.25, True), (1, True),
    ({"score": 0.0}, False), ({"score": 2.0}, True),
    ({"score": 0.0, "success": True}, True), ({"score": 1.0, "success": False}, False),
])
def test_a_returned_score_succeeds_only_above_zero_unless_it_says(value, success) -> None:
    reward = as_reward(value, "my_agents:run")
    assert isinstance(reward, Reward)
    assert reward.success is success
    assert reward.score == float(value["score"] if isinstance(value, dict) else value)


def test_none_is_no_reward_of_the_agents_own() -> None:
    assert as_reward(None, "my_agents:run") is None


class Asked(Exception):
    """Raised by the stand-in LLM once the episode's limits are read (the gateway run is not needed)."""


def test_the_workflows_limits_reach_the_gateway_episode_each_its_own(tmp_path: Path) -> None:
    """max_calls, max_concurrent_calls and max_n of `workflow:` are the episode's, one for one."""
    (tmp_path / "limits_agent.py").write_text("def run(task, llm_base_url, env, api_key):\n    return None\n")
    config = AgentConfig(entrypoint=f"{tmp_path / 'limits_agent.py'}:run", max_calls=7, max_concurrent_calls=2,
                         max_n=3)
    asked = []

    class Chat:
        def gateway_episode(self, **limits):
            asked.append(limits)
            raise Asked

    with pytest.raises(Asked):
        asyncio.run(AgentWorkflow(config).play(Task("limits-1"), None, [Chat()]))
    assert asked == [{"max_calls": 7, "max_concurrent_calls": 2, "max_n": 3}]

"""An AgentScope agent that plays FrozenLake with a `move` tool; `run` is the `agent` workflow's entrypoint.

    workflow: {name: agent, entrypoint: "beyondagent_plugin_agentscope.frozenlake:run"}

`beyondagent run examples/agentscope_frozenlake.yaml` trains it. Nothing in it knows about
training except `make_agent`, which points AgentScope's OpenAI chat model at the episode's
`llm_base_url` (with its `api_key`) and sets the RL defaults (`rl.py`). The game is the episode's env: the `move` tool
calls `env.step`. The opening user message is the env's first observation; the agent's reply
loop (think, call `move`, read the board, ...) runs until the game is over. A reply that ends
without a tool call is the agent's answer, and is played as its move in text, as the env's own
instructions ask ("Action: left"): a model that never writes tool calls (the `tiny` test model)
still plays, and the next observation is the agent's next user message. No reward is returned:
the env's `evaluate()` scores the episode.
"""

from __future__ import annotations

from typing import Any, Literal

from agentscope.message import UserMsg
from agentscope.types import ReplyFinishedReason

from beyondagent_plugin_agentscope.rl import make_agent

TOOL_HINT = "Move with the move tool, one call per move; a reply without a tool call is read as your action."


class Game:
    """The episode's env as the agent's tool, and whether the game is over."""

    def __init__(self, env: Any):
        self.env = env
        self.over = False

    async def move(self, direction: Literal["left", "down", "right", "up"]) -> str:
        """Move one cell on the map; returns the board after the move.

        Args:
            direction: Where to move: left, down, right or up.
        """
        if self.over:
            return "The game is over."
        return await self.play(direction)

    async def play(self, action: str) -> str:
        step = await self.env.step({"role": "assistant", "content": action})
        self.over = bool(step.terminated)
        return "\n".join(str(message.get("content") or "") for message in step.observation)


async def run(task: Any, llm_base_url: str, env: Any, api_key: str, *, stream: bool = False) -> None:
    """Play one episode (`stream`: the model's calls stream through the gateway)."""
    reset = await env.reset(task)
    system = "\n".join(m["content"] for m in reset.messages if m["role"] == "system")
    opening = "\n".join(m["content"] for m in reset.messages if m["role"] != "system")
    game = Game(env)
    agent = make_agent(llm_base_url, api_key, system_prompt=f"{system}\n{TOOL_HINT}", tools=[game.move], stream=stream,
                       max_model_calls=2 * int(reset.info.get("max_steps", 8)), stop_when=lambda: game.over)
    message = opening
    try:
        while not game.over:
            reply = await agent.reply(UserMsg(name="user", content=message))
            if game.over or reply.finished_reason != ReplyFinishedReason.COMPLETED:
                break
            message = await game.play(reply.get_text_content() or "")
    finally:
        await agent.model.client.close()
    return None  # the env's evaluate() scores the episode

"""`appworld_react`: the code-writing ReAct loop for AppWorld.

The system prompt (`prompt.py`: the API-discovery pattern, logging in, paging, completing the
task) opens the conversation, then the env's task message (supervisor and instruction); each
model turn is reasoning plus one code block, which the env runs and answers with its output,
until the code completes the task, `max_turns` model turns, or the token budget runs out.
The env's `evaluate()` (AppWorld's `evaluate_task`) gives the reward.
"""

from __future__ import annotations

from typing import Any

from beyondagent_core.protocols import EnvReset, EnvStep, Message
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow
from beyondagent_plugin_appworld.config import AppWorldReactConfig
from beyondagent_plugin_appworld.prompt import SYSTEM_PROMPT


class AppWorldReact(ReactWorkflow):
    """The core's react loop with AppWorld's system prompt first, counting the turns that ran code."""

    def __init__(self, config: AppWorldReactConfig | None = None, system_prompt: str = SYSTEM_PROMPT):
        config = config or AppWorldReactConfig()
        super().__init__(ReactConfig(max_turns=config.max_turns, temperature=config.temperature,
                                     top_p=config.top_p, max_tokens=config.max_tokens))
        self.system_prompt = system_prompt

    def opening(self, reset: EnvReset) -> list[Message]:
        return [{"role": "system", "content": self.system_prompt}, *super().opening(reset)]

    def step_metrics(self, steps: list[EnvStep]) -> dict[str, Any]:
        return {"code_turns": sum(bool(step.info.get("ran_code")) for step in steps)}

"""`appworld_react`: the code-writing ReAct loop for AppWorld.

The system prompt (`prompt.py`: the API-discovery pattern, logging in, paging, completing the
task) opens the conversation, then the env's task message (supervisor and instruction); each
model turn is reasoning plus one code block, which the env runs and answers with its output,
until the code completes the task, `max_turns` model turns, or the token budget runs out.
The env's `evaluate()` (AppWorld's `evaluate_task`) gives the reward.
"""

from __future__ import annotations

import attrs

from beyondagent_core.protocols import AsyncEnv, ChatLLM
from beyondagent_core.runtime.react import check_messages
from beyondagent_core.runtime.tokens import ContextLengthExceeded
from beyondagent_core.types import Task, Trajectory, Turn
from beyondagent_plugin_appworld.config import AppWorldReactConfig
from beyondagent_plugin_appworld.prompt import SYSTEM_PROMPT


class AppWorldReact:
    def __init__(self, config: AppWorldReactConfig | None = None, system_prompt: str = SYSTEM_PROMPT):
        self.config = config or AppWorldReactConfig()
        self.system_prompt = system_prompt
        self.sampling = {key: value for key, value in attrs.asdict(self.config).items()
                         if key != "max_turns" and value is not None}

    async def run(self, task: Task, env: AsyncEnv, llm: ChatLLM) -> Trajectory:
        reset = await env.reset(task)
        messages = [{"role": "system", "content": self.system_prompt}, *check_messages(reset.messages, "reset()")]
        turns = [Turn(role=m["role"], content=m["content"]) for m in messages]
        terminated, truncated, model_turns, ran_code = False, False, 0, 0
        while model_turns < self.config.max_turns:
            try:
                reply = await llm.chat(messages, **self.sampling)
            except ContextLengthExceeded:
                truncated = True
                break
            model_turns += 1
            turns.append(reply)
            action = {"role": "assistant", "content": reply.content}
            messages.append(action)
            step = await env.step(action)
            ran_code += bool(step.info.get("ran_code"))
            for message in check_messages(step.observation, "step()"):
                messages.append(message)
                turns.append(Turn(role=message["role"], content=message["content"]))
            if step.terminated:
                terminated = True
                break
        reward = await env.evaluate()
        metrics = {"turns": model_turns, "code_turns": ran_code, "truncated": truncated}
        return Trajectory(task=task, turns=turns, reward=reward, terminated=terminated, metrics=metrics)

"""`bfcl`: the function-calling agent loop for BFCL episodes.

The env's reset gives the entry's first user turn and its functions (`info["tools"]`). With the
env's `style: tools` the functions go into the system message the way Qwen2.5's chat template
presents tools (`beyondagent_plugin_gateway.tool_calls.with_tools`: `<tools>` JSON lines, answer in
`<tool_call>` blocks), after `system_prompt` when one is set; with `style: prompting` the env
already put BFCL's own system prompt first. Then the model acts and the env answers (function
results, or the next user turn when a message has no call) until the env ends the episode,
`max_turns` model turns, or the token budget. Calls are parsed by the env (one parser, the
core's); its per-step counts become the episode's metrics: `calls`, `malformed_calls`,
`call_errors` (calls the backends refused), `calls_not_run` (calls past a bound: `bounds.py`, the step's
limits), `user_turns`.
"""

from __future__ import annotations

from typing import Any

from beyondagent_core.protocols import EnvReset, EnvStep, Message
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow, check_messages
from beyondagent_plugin_gateway.tool_calls import with_tools
from beyondagent_plugin_bfcl.config import BFCLWorkflowConfig


class BFCLWorkflow(ReactWorkflow):
    """The core's react loop with the functions presented as tools (see the module docstring)."""

    def __init__(self, config: BFCLWorkflowConfig | None = None):
        config = config or BFCLWorkflowConfig()
        super().__init__(ReactConfig(max_turns=config.max_turns, temperature=config.temperature,
                                     top_p=config.top_p, max_tokens=config.max_tokens))
        self.system_prompt = config.system_prompt

    def opening(self, reset: EnvReset) -> list[Message]:
        messages = check_messages(reset.messages, "reset()")
        if reset.info.get("style", "tools") == "prompting":
            return messages
        tools = reset.info.get("tools") or []
        if self.system_prompt and not (messages and messages[0]["role"] == "system"):
            messages = [{"role": "system", "content": self.system_prompt}, *messages]
        elif self.system_prompt:
            messages[0] = {"role": "system", "content": f"{self.system_prompt}\n\n{messages[0]['content']}"}
        return with_tools(messages, tools) if tools else messages

    def step_metrics(self, steps: list[EnvStep]) -> dict[str, Any]:
        return {"calls": sum(int(step.info.get("calls", 0)) for step in steps),
                "malformed_calls": sum(int(step.info.get("malformed_calls", 0)) for step in steps),
                "call_errors": sum(int(step.info.get("errors", 0)) for step in steps),
                "calls_not_run": sum(int(step.info.get("not_run", 0)) for step in steps),
                "user_turns": 1 + sum(bool(step.info.get("ended_turn")) and not step.terminated for step in steps)}

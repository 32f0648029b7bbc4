"""`math_tool`: a multi-turn math agent that may run Python in a sandbox between its turns.

The loop: the model replies; if the reply holds code, the code runs in the sandbox
(`sandbox.py`) and its output comes back as the next message (role `observation_role`,
`user` by default), and the model replies again; a reply with no code is the final answer.
Training sees one token sequence per episode: the model's turns as sampled (loss mask 1) and
the tool output as chat-template tokens (loss mask 0), see `beyondagent_core.runtime.tokens`.

Tool calls are read from the model's text (no function-calling API needed):

- fenced blocks: ```` ```python ... ``` ```` (or ```` ```py ````);
- tags: `<python> ... </python>`;
- a block left open at the end of the reply (a stop string cut its closing) counts too.

All the code blocks of one reply run together, in order, as one program. A reply whose last
`\\boxed{}` comes after its last code block is a final answer: its code is not run. After
`max_tool_calls` runs, further code gets a note asking for the final answer instead. Nothing
the tool does (crash, hang, flood of output, sandbox failure) raises into the trainer: it
becomes the observation text.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from beyondagent_core.protocols import ChatLLM
from beyondagent_core.runtime.tokens import ContextLengthExceeded
from beyondagent_core.types import Task, Trajectory, Turn
from beyondagent_plugin_math.config import MathToolConfig
from beyondagent_plugin_math.prompts import opening_messages, sampling_of
from beyondagent_plugin_math.sandbox import PythonSandbox, ToolResult

_BLOCKS = re.compile(
    r"```(?:python|py)[ \t]*\n(?P<fenced>.*?)(?:```|\Z)|<python>(?P<tagged>.*?)(?:</python>|\Z)",
    re.DOTALL | re.IGNORECASE,
)
BUDGET_SPENT = "[no more code runs in this episode: give your final answer in \\boxed{}]"


def find_code(reply: str) -> str | None:
    """The program a reply asks to run (its code blocks joined), or None for a final answer."""
    blocks = list(_BLOCKS.finditer(reply or ""))
    code = [(m.group("fenced") if m.group("fenced") is not None else m.group("tagged")) for m in blocks]
    code = [block.strip("\n") for block in code if block and block.strip()]
    if not code:
        return None
    boxed_at = max(reply.rfind("\\boxed"), reply.rfind("\\fbox"))
    if boxed_at > blocks[-1].end() - 1:
        return None
    return "\n\n".join(code)


class MathToolWorkflow:
    def __init__(self, config: MathToolConfig | None = None):
        self.config = config or MathToolConfig()
        if not self.config.observation_role:
            raise ValueError("observation_role must be a chat role such as 'user' or 'tool'")
        self.sampling = sampling_of(self.config)
        self.sandbox = PythonSandbox(self.config.sandbox)

    async def run(self, task: Task, env: Any, llm: ChatLLM) -> Trajectory:
        config = self.config
        messages = opening_messages(task, config.system_prompt, use_task_prompt=config.use_task_prompt)
        turns = [Turn(role=m["role"], content=m["content"]) for m in messages]
        stats = {"turns": 0, "tool_calls": 0, "tool_errors": 0, "tool_timeouts": 0, "tool_seconds": 0.0}
        truncated, answered = False, False
        while stats["turns"] < config.max_turns:
            try:
                reply = await llm.chat(messages, **self.sampling)
            except ContextLengthExceeded:
                truncated = True
                break
            stats["turns"] += 1
            turns.append(reply)
            messages.append({"role": "assistant", "content": reply.content})
            code = find_code(reply.content)
            if code is None:
                answered = True
                break
            if stats["turns"] >= config.max_turns:
                break  # no turn left to read the output: don't run it
            observation = await self._observe(code, stats)
            messages.append({"role": config.observation_role, "content": observation})
            turns.append(Turn(role=config.observation_role, content=observation))
        metrics: dict[str, Any] = {**stats, "truncated": truncated, "answered": answered}
        metrics["tool_seconds"] = round(stats["tool_seconds"], 3)
        return Trajectory(task=task, turns=turns, terminated=answered, metrics=metrics)

    async def _observe(self, code: str, stats: dict[str, Any]) -> str:
        if stats["tool_calls"] >= self.config.max_tool_calls:
            return BUDGET_SPENT
        stats["tool_calls"] += 1
        try:
            result = await asyncio.to_thread(self.sandbox.run, code)
        except Exception as exc:  # noqa: BLE001 - `run` never raises; this guards the guard
            result = ToolResult(exit_code=None, error=f"{type(exc).__name__}: {exc}")
        stats["tool_seconds"] += result.seconds
        stats["tool_errors"] += int(not result.ok)
        stats["tool_timeouts"] += int(result.timed_out)
        return result.observation()

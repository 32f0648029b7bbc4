"""AgentScope's `Agent` set up for exact-token RL through the gateway: `make_agent(llm_base_url, api_key, ...)`.

The gateway trains on the ids the policy sampled, and an episode stays one sample only while each
call's prompt starts with the previous call's prompt and reply (docs/agents.md). AgentScope 2.x
does several things by default that break that, or that make no sense without a person present;
`make_agent` (or `rl_model` + `rl_tool` + `RLMiddleware` + `rl_configs` for an `Agent` built by
hand) turns each off:

- **Runtime-state injection** (`InjectionConfig.inject_runtime_state`, on by default): a
  `<system-reminder>` with the wall-clock time, the context length or a repeated-tool-error hint,
  inserted into the history as a user message. Off: the prompt never depends on the clock.
- **Context compression** (`Agent.compress_context`, before every model call): once the
  estimated tokens pass `trigger_ratio * context_size`, the history is replaced by a summary the
  model writes in an extra call. `RLMiddleware.on_compress_context` skips it: a rewritten history
  would split the episode, and the summary call would be trained as a sample of its own.
- **The max-iterations finalization**: at `ReActConfig.max_iters` AgentScope adds a "you have
  reached the maximum..." hint and calls the model with `tool_choice: none`, which drops the tools
  from the prompt. `RLMiddleware` ends the reply itself after `max_model_calls` calls (and whenever
  `stop_when()` is true, e.g. the game is over), without a model call; `max_iters` is set above
  that so AgentScope's own finalization never fires.
- **Permission prompts**: a `FunctionTool` without a permission decision asks the user: the
  reply parks ("I'm waiting for your permission...") and the tool never runs. `rl_tool` allows every call (`PermissionDecision`
  ALLOW); `read_only=True` marks a tool that only reads.
- **Concurrent tool calls**: tools are concurrency-safe by default, so two calls of one reply run
  at once. `rl_tool` runs them one after another (an env's `step` is not re-entrant).
- **Empty replies**: AgentScope keeps no block for a reply with no text and no tool call, and its
  formatter then drops that assistant turn from the next prompt, which splits the episode.
  `RLMiddleware.on_model_call` keeps an empty text block instead, sent back as `""`.
- **Retries**: the model retries a failed call 3 times and the `openai` client 2 times inside
  each, so a call refused past the episode's `workflow.max_calls` (429) is sent 12 times, with
  back-off, before the agent fails. `rl_model` sets both to 0: a refused call fails at once.
- **The client's timeouts**: `rl_model` sets no client timeout: the workflow's `timeout` bounds
  the episode. (Found when async agents still ran on the rollout's event loop, whose decode steps
  made the `openai` client's 5 s connect timeout fire with SmolLM2-135M on 2 shared cores; they now
  run on a loop of their own.)
- **Cancellation**: AgentScope swallows `asyncio.CancelledError` in a reply and answers with its
  interruption message; `interruption_raise_cancelled_error` makes the workflow's `timeout`
  really stop the agent.
- **Streaming**: on by default in AgentScope; `rl_model` does not stream (`stream=True` works
  too: the gateway streams the whole reply at once).

Left as AgentScope has them, and harmless to the tokens: tool results are plain strings (a
function's `str` return is the tool message's content; other values are JSON-encoded);
`temperature`, `top_p` and `max_tokens` are not sent, so the backend's apply; messages carry a
`name` (chat templates ignore it); a tool result over `ContextConfig.tool_result_limit` (50,000
tokens) is truncated with a note, as the model would see it in deployment.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from agentscope.agent import Agent, InjectionConfig, ModelConfig, ReActConfig
from agentscope.credential import OpenAICredential
from agentscope.message import AssistantMsg, TextBlock
from agentscope.middleware import MiddlewareBase
from agentscope.model import ChatResponse, OpenAIChatModel
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, ToolBase, Toolkit
from agentscope.types import ReplyFinishedReason

__all__ = ["RLMiddleware", "make_agent", "rl_configs", "rl_model", "rl_tool"]

MODEL_NAME = "policy"  # any name works: the gateway always answers with the policy being trained


def rl_model(llm_base_url: str, api_key: str, *, stream: bool = False, **parameters: Any) -> OpenAIChatModel:
    """AgentScope's `OpenAIChatModel` on the episode's gateway URL, with the episode's key (the
    `api_key` its `run` gets): no retries, no client timeout.

    `parameters` are `OpenAIChatModel.Parameters` (`max_tokens`, `temperature`, `top_p`, ...);
    leave them unset to sample as the backend does (a temperature of your own trains off-policy).
    """
    return OpenAIChatModel(
        credential=OpenAICredential(api_key=api_key, base_url=llm_base_url),
        model=MODEL_NAME,
        parameters=OpenAIChatModel.Parameters(**parameters),
        stream=stream,
        max_retries=0,
        client_kwargs={"max_retries": 0, "timeout": None},
    )


def rl_tool(function: Callable[..., Any], *, read_only: bool = False, name: str | None = None,
            description: str | None = None) -> FunctionTool:
    """A function as a tool the agent calls without asking anyone, one call at a time.

    The schema comes from the signature and the docstring's `Args:` (AgentScope's `FunctionTool`);
    what the function returns is the tool message (a string as it is, anything else as JSON).
    """
    return FunctionTool(
        function, name=name, description=description, is_read_only=read_only, is_concurrency_safe=False,
        permission=PermissionDecision(behavior=PermissionBehavior.ALLOW,
                                      message="allowed: a training episode has no one to ask"),
    )


def rl_configs(max_model_calls: int = 50) -> dict[str, Any]:
    """The `Agent` keyword arguments RL needs (`model_config`, `react_config`, `injection_config`)."""
    return {
        "model_config": ModelConfig(max_retries=0),
        "react_config": ReActConfig(max_iters=max_model_calls + 1, interruption_raise_cancelled_error=True),
        "injection_config": InjectionConfig(inject_runtime_state=False),
    }


class RLMiddleware(MiddlewareBase):
    """No context compression, no dropped empty replies, and a reply that ends without a model call
    once `stop_when()` is true or `max_model_calls` calls were made (its message then says why, with
    `finished_reason` COMPLETED or EXCEED_MAX_ITERS). `model_calls` counts this agent's calls."""

    def __init__(self, max_model_calls: int = 50, stop_when: Callable[[], bool] | None = None):
        if max_model_calls < 1:
            raise ValueError(f"max_model_calls must be >= 1, got {max_model_calls}")
        self.max_model_calls = max_model_calls
        self.stop_when = stop_when
        self.model_calls = 0

    async def on_reasoning(self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator]
                           ) -> AsyncGenerator:
        if self.stop_when is not None and self.stop_when():
            yield AssistantMsg(name=agent.name, content="Done.", id=agent.state.reply_id,
                               finished_reason=ReplyFinishedReason.COMPLETED)
            return
        if self.model_calls >= self.max_model_calls:
            yield AssistantMsg(name=agent.name, content=f"Stopped after {self.model_calls} model calls.",
                               id=agent.state.reply_id, finished_reason=ReplyFinishedReason.EXCEED_MAX_ITERS)
            return
        self.model_calls += 1
        async for item in next_handler(**input_kwargs):
            yield item

    async def on_compress_context(self, agent: Any, input_kwargs: dict, next_handler: Callable[..., Any]) -> None:
        return None

    async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Callable[..., Any]) -> Any:
        response = await next_handler(**input_kwargs)
        if isinstance(response, ChatResponse):
            return _keep_empty(response)
        if inspect.isasyncgen(response):
            return _keep_empty_stream(response)
        return response


def _keep_empty(response: ChatResponse) -> ChatResponse:
    if response.is_last and not response.content:
        response.content = [TextBlock(text="")]
    return response


async def _keep_empty_stream(chunks: AsyncGenerator[ChatResponse, None]) -> AsyncGenerator[ChatResponse, None]:
    async for chunk in chunks:
        yield _keep_empty(chunk)


def make_agent(llm_base_url: str, api_key: str, *, system_prompt: str,
               tools: Sequence[Callable[..., Any] | ToolBase] = (),
               name: str = "agent", max_model_calls: int = 50, stop_when: Callable[[], bool] | None = None,
               stream: bool = False, middlewares: Sequence[MiddlewareBase] = (), **parameters: Any) -> Agent:
    """An AgentScope `Agent` on the episode's `llm_base_url` with its `api_key`, set up for RL (see the
    module docstring).

    `tools`: functions (wrapped with `rl_tool`) or AgentScope tools as they are. `stop_when`: ends
    the reply before the next model call once it returns true. `middlewares`: yours, inside
    `RLMiddleware`. `parameters`: `OpenAIChatModel.Parameters` (see `rl_model`). The agent's
    `RLMiddleware` is `agent.rl` (its `model_calls`: the calls made so far).
    """
    toolkit = Toolkit(tools=[tool if isinstance(tool, ToolBase) else rl_tool(tool) for tool in tools])
    rl = RLMiddleware(max_model_calls, stop_when)
    agent = Agent(name=name, system_prompt=system_prompt,
                  model=rl_model(llm_base_url, api_key, stream=stream, **parameters),
                  toolkit=toolkit, middlewares=[rl, *middlewares], **rl_configs(max_model_calls))
    agent.rl = rl
    return agent

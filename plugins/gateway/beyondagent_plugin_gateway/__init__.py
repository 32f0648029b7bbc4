"""The OpenAI-compatible gateway and the `agent` workflow: an agent written with any framework talks to
the policy being trained (beyondagent-plugin-gateway).

During rollout the backend serves `POST /<episode-id>/v1/chat/completions` on loopback, one base
URL and one API key per episode (a call without the key is a 401), and records every call's
prompt ids, sampled ids and log-probs exactly as the generator produced them. The modules, one job
each:

- `api.py`: the OpenAI request (validated: unsupported parameters are a 400 naming them) and the
  response and streaming chunks the `openai` SDK reads;
- `render.py`: a request's messages and tools into the chat template's prompt text;
- `samples.py`: calls into training samples: a call whose prompt extends an earlier call's prompt
  and reply continues that sample, any other call starts a new one (never force-merged);
- `episode.py`: one episode's endpoint: render, generate through the backend's `TokenGenerator`,
  parse tool calls, record; the episode's limits (calls in flight, `n`, its token budget);
- `server.py`: the HTTP server (Starlette on uvicorn, in a thread of its own) that authenticates
  each call by its episode's key and routes it to its endpoint on the rollout's event loop.

- `tool_calls.py`: tool calls in and out of each model family's chat format;
- `agent.py` (settings in `config.py`): the `agent` workflow, registered here, which opens an
  endpoint per episode and runs the user's agent against its URL.

A backend serves the gateway by giving its chat LLM a `gateway_episode(...)` that returns a
`GatewayEpisode` over its own token generator (the torch backend's `policy_chat.py`, verl's
`verl_chat.py`), so backends that do depend on this plugin. Factories are `"module:attr"` strings:
listing plugins imports only `config.py`.
"""

from __future__ import annotations

from beyondagent_core import WorkflowSpec, hookimpl
from beyondagent_plugin_gateway.config import AgentConfig

__all__ = ["beyondagent_workflows"]


@hookimpl
def beyondagent_workflows() -> list[WorkflowSpec]:
    return [WorkflowSpec(
        name="agent", factory="beyondagent_plugin_gateway.agent:AgentWorkflow", config_cls=AgentConfig,
        summary="Your own agent (any framework) run(task, llm_base_url, env, api_key), through the "
                "OpenAI-compatible gateway.")]

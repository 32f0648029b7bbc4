"""BeyondAgent and AgentScope 2.x: an `agentscope.agent.Agent` trained through the OpenAI-compatible gateway.

An AgentScope agent trains with the `agent` workflow like any other agent (docs/agents.md): its
`run(task, llm_base_url, env, api_key)` builds the agent with its model pointed at `llm_base_url`. What
this package adds is the settings exact-token RL needs, in one call (`rl.py`):

    from beyondagent_plugin_agentscope import make_agent
    agent = make_agent(llm_base_url, api_key, system_prompt="...", tools=[my_tool])

and an example agent that plays FrozenLake with a `move` tool (`frozenlake.py`, trained by
examples/agentscope_frozenlake.yaml). The plugin registers no component: the entry point only
makes it show in `beyondagent plugins`. agentscope itself (a few seconds to import) is imported
when an agent is built, never when the plugins load.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RLMiddleware", "make_agent", "rl_configs", "rl_model", "rl_tool"]


def __getattr__(name: str) -> Any:
    """`make_agent`, `rl_model`, ... from `rl.py`, imported (with agentscope) on first use."""
    if name in __all__:
        from beyondagent_plugin_agentscope import rl

        return getattr(rl, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

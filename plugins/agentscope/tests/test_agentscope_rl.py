"""`make_agent`'s RL settings, each against what AgentScope does by default, on the real gateway.

The policy here is a script (prompt text in, reply text out) behind the gateway's real
`GatewayEpisode`, with the tiny model's tokenizer and chat template: the agent, its
`OpenAIChatModel`, the HTTP calls and the gateway's token bookkeeping are all real. A script can
call tools forever, which the tiny model never does.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from gateway_helpers import LoopThread
from tiny_and_real import loaded_tokenizer

from beyondagent_plugin_gateway.episode import GatewayEpisode, GenerationSettings
from beyondagent_plugin_gateway.server import Gateway
from beyondagent_core.runtime.tokens import ChatTemplate

CALL = '<tool_call>\n{{"name": "{}", "arguments": {{}}}}\n</tool_call>'


@contextlib.contextmanager
def scripted_policy(reply: Callable[[str], str]) -> Iterator[tuple[GatewayEpisode, str, Any]]:
    """(the gateway episode, its base URL, the tokenizer) for a policy whose reply to a prompt is `reply(text)`."""
    tokenizer = loaded_tokenizer("tiny")
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    class Script:
        eos_token_ids = frozenset({end})

        async def generate(self, prompt_ids, settings, session):
            text = reply(tokenizer.decode(prompt_ids, skip_special_tokens=False))
            ids = tokenizer.encode(text, add_special_tokens=False) + [end]
            return ids, [-0.1] * len(ids)

        def end_session(self, session):
            pass

    loop, gateway = LoopThread(), Gateway()
    episode = GatewayEpisode(ChatTemplate(tokenizer), Script(), GenerationSettings(1.0, 1.0, 64),
                             max_episode_tokens=8192)
    endpoint = gateway.open(episode, loop.loop)
    try:
        yield episode, endpoint, tokenizer
    finally:
        gateway.close(endpoint.episode_id)
        gateway.stop()
        loop.stop()


def talk(make: Callable[[], Any], text: str = "Go.") -> Any:
    """The agent `make()` builds (on this event loop) replying to one user message."""
    from agentscope.message import UserMsg

    async def go() -> Any:
        agent = make()
        try:
            return await agent.reply(UserMsg(name="user", content=text))
        finally:
            await agent.model.client.close()

    return asyncio.run(go())


def test_the_plugin_loads_without_importing_agentscope() -> None:
    code = ("import sys, beyondagent_plugin_agentscope; from beyondagent_core.plugins import PluginManager; "
            "PluginManager().load(); assert 'agentscope' not in sys.modules, 'agentscope imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_tool_loop_is_one_sample_and_stops_at_the_call_budget_without_agentscope_s_hint() -> None:
    from agentscope.types import ReplyFinishedReason

    from beyondagent_plugin_agentscope import make_agent

    ran = []

    def look() -> str:
        """Look around."""
        ran.append(1)
        return f"You looked {len(ran)} time(s)."

    with scripted_policy(lambda prompt: CALL.format("look")) as (episode, endpoint, tokenizer):
        def make() -> Any:
            agent = make_agent(endpoint.base_url, endpoint.api_key, system_prompt="Explore.", tools=[look],
                               max_model_calls=4)
            agent.model.context_size = 64  # AgentScope would compress (summarize) this history at once
            return agent

        reply = talk(make)
        prompts = [tokenizer.decode(call.prompt_ids, skip_special_tokens=False) for call in episode.calls]
    # the tool ran after every call without asking anyone; the fifth call was never made
    assert len(episode.calls) == 4 and len(ran) == 4
    assert reply.finished_reason == ReplyFinishedReason.EXCEED_MAX_ITERS
    # no clock, no compression summary, no "maximum iterations" hint, and the tools in every prompt
    assert not any("system-reminder" in prompt or "system-info" in prompt for prompt in prompts)
    assert all("<tools>" in prompt for prompt in prompts)
    assert "You looked 4 time(s)." not in prompts[-1] and "You looked 3 time(s)." in prompts[-1]
    assert episode.splits == 0 and len(episode.samples) == 1


def test_stop_when_ends_the_reply_before_the_next_model_call() -> None:
    from agentscope.types import ReplyFinishedReason

    from beyondagent_plugin_agentscope import make_agent

    state = {"over": False}

    def finish() -> str:
        """End the game."""
        state["over"] = True
        return "The game is over."

    with scripted_policy(lambda prompt: CALL.format("finish")) as (episode, endpoint, _):
        reply = talk(lambda: make_agent(endpoint.base_url, endpoint.api_key, system_prompt="Play.", tools=[finish],
                                        stop_when=lambda: state["over"]))
    assert len(episode.calls) == 1 and reply.finished_reason == ReplyFinishedReason.COMPLETED


@pytest.mark.parametrize("rl", [True, False])
def test_a_timeout_cancels_the_reply(rl: bool) -> None:
    """The `agent` workflow's timeout cancels `run`. AgentScope's default answers a cancelled reply
    with its interruption message, so the episode would look finished; `make_agent` re-raises."""
    from agentscope.agent import ReActConfig

    from beyondagent_plugin_agentscope import make_agent

    async def wait() -> str:
        """Wait."""
        await asyncio.sleep(60)
        return "done"

    with scripted_policy(lambda prompt: CALL.format("wait")) as (_, endpoint, _tokenizer):
        async def go() -> Any:
            from agentscope.message import UserMsg

            agent = make_agent(endpoint.base_url, endpoint.api_key, system_prompt="Wait.", tools=[wait])
            if not rl:
                agent.react_config = ReActConfig()
            try:
                return await asyncio.wait_for(agent.reply(UserMsg(name="user", content="Go.")), 2)
            finally:
                await agent.model.client.close()

        if rl:
            with pytest.raises(TimeoutError):
                asyncio.run(go())
        else:
            assert "interruption" in asyncio.run(go()).get_text_content()


def test_the_model_neither_retries_nor_times_out_on_its_own() -> None:
    """A call is sent once, and waits as long as the workflow lets it. An async agent shares the
    rollout's event loop with the torch backend's decode steps; with the `openai` client's 5 s
    connect timeout, a loop held 6 s at a time made every call fail with `APITimeoutError`
    (measured; with no client timeout the same call succeeded)."""
    from beyondagent_plugin_agentscope import rl_model

    model = rl_model("http://127.0.0.1:9/episode/v1", "the-episode-key")
    assert (model.max_retries, model.client.max_retries, model.client.timeout, model.stream) == (0, 0, None, False)
    assert model.model == "policy" and model.parameters.temperature is None and model.parameters.max_tokens is None

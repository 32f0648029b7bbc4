"""The `llm` summarizer: which model it asks, and the seed query hidden in the actions it shows too.

From the eighth audit (mutation testing of the LLM roles): each test here fails on a plausible
bug the earlier tests let through: the summarizer's own `llm` block losing to the LLM the
exploration stage hands in (its model never reaching the request), and the seed task's query
left unmasked where the agent's own action repeats it. The models are `ScriptedOpenAIServer` on
loopback (the `openai_server` fixture), reached through the real `openai` client: it stands in
for a hosted LLM, which cannot be reached here.
"""

from __future__ import annotations

import asyncio

from beyondagent_plugin_llm.summarizer import MASK, LLMSummarizer, LLMSummarizerConfig

from beyondagent_core.llm import LLMConfig, OpenAIChat
from beyondagent_core.testing.openai_server import ScriptedOpenAIServer
from beyondagent_core.types import Task, Trajectory, Turn

SEED = Task(task_id="lake-9", env="frozenlake", query="Reach the gift at row 3, column 3.")


def exploration() -> Trajectory:
    """Two answered actions; the first restates the seed query, as an agent thinking aloud does."""
    return Trajectory(task=SEED, turns=[
        Turn(role="user", content="You are at row 0, column 0."),
        Turn(role="assistant", content=f"My goal: {SEED.query} First: right"),
        Turn(role="user", content="You moved right."),
        Turn(role="assistant", content="down"),
        Turn(role="user", content="You moved down."),
    ])


def chat_client(server: ScriptedOpenAIServer, model: str) -> OpenAIChat:
    return OpenAIChat(LLMConfig(model=model, base_url=server.base_url, timeout=5.0, max_llm_retries=0))


def test_its_own_llm_block_wins_over_the_explorers_llm(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("", "")
    own = LLMConfig(model="own-summarizer", base_url=openai_server.base_url, timeout=5.0, max_llm_retries=0)
    explorers = chat_client(openai_server, "explorer-model")

    asyncio.run(LLMSummarizer(LLMSummarizerConfig(llm=own)).summarize(SEED, exploration(), [], explorers))
    asyncio.run(LLMSummarizer().summarize(SEED, exploration(), [], explorers))  # no block: the explorer's

    assert [request["model"] for request in openai_server.requests] == ["own-summarizer", "explorer-model"]


def test_the_seed_query_is_masked_in_the_actions_as_well(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("")
    asyncio.run(LLMSummarizer().summarize(SEED, exploration(), [], chat_client(openai_server, "summarizer")))

    prompt = openai_server.requests[0]["messages"][-1]["content"]
    assert SEED.query not in prompt
    assert f">>> STEP 0 <<<\n[action]\nMy goal: {MASK} First: right\n[observation]\nYou moved right." in prompt
    assert ">>> STEP 1 <<<\n[action]\ndown\n[observation]\nYou moved down." in prompt

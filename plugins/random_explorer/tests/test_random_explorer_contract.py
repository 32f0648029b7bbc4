"""The explorer contract suite (`beyondagent_core.testing.explorer_contract`) on the `random` explorer.

Both modes, on gymnasium's FrozenLake from the gym plugin: `random_actions` needs no LLM; `llm`
talks to `openai_server`, the loopback stand-in for a hosted LLM, which answers every request
with one move.
"""

from __future__ import annotations

import pytest

from beyondagent_core.llm import LLMConfig, OpenAIChat
from beyondagent_core.testing.explorer_contract import ExplorerContract
from beyondagent_core.types import Task

SEEDS = [Task(task_id="frozenlake-train-0", env="frozenlake", query="Reach G quickly.",
              metadata={"map": ["SFFF", "FHFH", "FFFH", "HFFG"]}),
         Task(task_id="frozenlake-train-1", env="frozenlake", query="Reach G.", metadata={"map": ["SF", "HG"]})]


@pytest.mark.beyondagent_plugins("random_explorer", "gym")
class TestRandomActions(ExplorerContract):
    @pytest.fixture
    def implementation(self):
        return {"name": "random", "mode": "random_actions", "max_explore_step": 5, "seed": 1}

    @pytest.fixture
    def env(self):
        return {"name": "frozenlake", "max_steps": 20}

    @pytest.fixture
    def seeds(self):
        return SEEDS


@pytest.mark.beyondagent_plugins("random_explorer", "gym")
class TestLlmMode(TestRandomActions):
    @pytest.fixture
    def implementation(self):
        return {"name": "random", "mode": "llm", "max_explore_step": 3}

    @pytest.fixture
    def llm(self, openai_server):
        openai_server.responder = lambda body: "I try the next cell. Action: right"
        return OpenAIChat(LLMConfig(model="stand-in", base_url=openai_server.base_url, backoff_base=0.0))

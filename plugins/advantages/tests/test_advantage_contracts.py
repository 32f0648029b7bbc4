"""Every first-party estimator passes the core's contract suite (`beyondagent_core.testing.advantage_contract`).

`adca` asks its step judge on loopback (`openai_server`, a stand-in for a hosted LLM) which labels
a step GOOD when its action names an even rollout.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from beyondagent_core.testing.advantage_contract import AdvantageContract

pytestmark = pytest.mark.beyondagent_plugins("advantages")


class TestGrpo(AdvantageContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "grpo"}


class TestDrGrpo(AdvantageContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "grpo", "norm_by_std": False}


class TestDrGrpoEstimator(AdvantageContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "dr_grpo"}


class TestRloo(AdvantageContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "rloo"}


class TestReinforcePlusPlus(AdvantageContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "reinforce_plus_plus", "gamma": 0.9}


class TestReinforcePlusPlusBaseline(AdvantageContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "reinforce_plus_plus_baseline"}


class TestGae(AdvantageContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "gae", "gamma": 0.99, "lam": 0.95}


class TestRae(AdvantageContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "rae", "decay": 0.9}


class TestGigpo(AdvantageContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "gigpo", "gamma": 0.9}


class TestGigpoMeanNorm(AdvantageContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "gigpo", "mode": "mean_norm", "singleton": "zero"}


def even_rollouts_are_good(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    actions = re.findall(r"^Step (\d+)\nACTION: action \d+ of \w+/(\d+)$", prompt, flags=re.MULTILINE)
    return "\n".join(f"Step {n}: {'GOOD' if int(seed) % 2 == 0 else 'BAD'}" for n, seed in actions)


class TestAdca(AdvantageContract):
    @pytest.fixture
    def implementation(self, openai_server: Any) -> dict[str, Any]:
        openai_server.responder = even_rollouts_are_good
        return {"name": "adca", "llm": {"model": "judge", "base_url": openai_server.base_url, "timeout": 5.0}}

    def test_every_trajectory_with_steps_was_judged(self, estimator: Any) -> None:
        from beyondagent_core.testing.advantage_contract import sample_batch

        result = estimator.estimate(sample_batch())
        assert result.metrics["fallback_groups"] == 0 and result.metrics["judged"] == 6  # one has no turns

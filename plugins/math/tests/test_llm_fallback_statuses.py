"""`math_answer_or_llm`, class-wide: which rule statuses reach the LLM (only `no_answer`, `undecided`),
what the LLM's reward carries of the rule's, and which LLM a judge built from a spec asks.

The eighth audit's follow-up (mutation testing of the LLM roles): `not_a_number` and
`no_reference` are final rule verdicts that cost no LLM call; the LLM judge is built only when
first needed, bound to the run (no `llm_judge.llm` block: the spec's `llm`; a block: its own).
The LLM is `ScriptedOpenAIServer` on loopback (the `openai_server` fixture), reached through the
real `openai` client: it stands in for a hosted LLM, which cannot be reached here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_math.llm_fallback import FALLBACK_STATUSES, MathAnswerOrLLMJudge
from test_audit8_llm_fallback import chat_client

from beyondagent_core.testing.openai_server import ScriptedOpenAIServer, run_context_with_llm
from beyondagent_core.types import Task, Trajectory, Turn

HALF = Task(task_id="half", query="What is half of one?", ground_truth="1/2")
NO_REFERENCE = Task(task_id="open", query="Name a fraction.", ground_truth=None)


def answered(task: Task, reply: str) -> Trajectory:
    return Trajectory(task=task, turns=[Turn("user", task.query or ""), Turn("assistant", reply)])


@pytest.mark.parametrize(("task", "reply", "status"), [
    (HALF, r"\boxed{x+1}", "not_a_number"),
    (NO_REFERENCE, "It is one half.", "no_reference"),
    (HALF, r"\boxed{1/2}", "correct"),
])
def test_a_final_rule_verdict_costs_no_llm_call(openai_server: ScriptedOpenAIServer, task: Task, reply: str,
                                                status: str) -> None:
    judge = MathAnswerOrLLMJudge(llm=chat_client(openai_server, "grader"))
    reward = asyncio.run(judge.score(task, answered(task, reply)))
    assert (reward.details["status"], reward.details["judge"]) == (status, "rule")
    assert judge.llm_calls == 0 and openai_server.requests == [] and judge._llm_judge is None
    assert FALLBACK_STATUSES == ("no_answer", "undecided")


def test_the_llms_reward_says_what_the_rule_found(openai_server: ScriptedOpenAIServer) -> None:
    judge = MathAnswerOrLLMJudge(llm=chat_client(openai_server, "grader"))
    openai_server.push("<verdict>no</verdict>")
    reward = asyncio.run(judge.score(HALF, answered(HALF, "Roughly a third.")))
    assert (reward.score, reward.success, reward.details["judge"]) == (0.0, False, "llm")
    assert reward.details["rule_status"] == "no_answer"
    assert reward.details["rule_reason"].startswith("no final answer found")
    assert reward.reason == "llm_judge: 0/1 judgement(s) say yes"


def spec_context(tmp_path: Path, plugin_manager: Any, server: ScriptedOpenAIServer, reward: dict[str, Any]) -> Any:
    """A real run context (as `beyondagent run` makes) whose spec's `llm` is `server`'s `spec-model`."""
    return run_context_with_llm(tmp_path, plugin_manager, server, reward, name="fallback-llm")


@pytest.mark.beyondagent_plugins("llm", "math", "mixers")
def test_built_from_a_spec_it_asks_its_own_block_or_else_the_specs_llm(tmp_path: Path, plugin_manager: Any,
                                                                      openai_server: ScriptedOpenAIServer) -> None:
    own = {"model": "own-grader", "base_url": openai_server.base_url, "max_llm_retries": 0}
    openai_server.responder = lambda body: "<verdict>yes</verdict>"
    for reward in ({"name": "math_answer_or_llm", "llm_judge": {"llm": own}}, {"name": "math_answer_or_llm"}):
        judge = spec_context(tmp_path, plugin_manager, openai_server, reward).build("reward")
        assert judge._llm_judge is None  # built on first need
        assert asyncio.run(judge.score(HALF, answered(HALF, "It is one half."))).score == 1.0
    assert [request["model"] for request in openai_server.requests] == ["own-grader", "spec-model"]

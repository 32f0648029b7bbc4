"""`math_answer_or_llm`: the LLM it is given is the one asked, and its LLM judge's default mode is binary.

From the eighth audit (mutation testing of the LLM roles): each test here fails on a plausible
bug the earlier tests let through: the judge dropping the `llm` it was constructed with (its
`llm_judge.llm` block, or the run's, asked instead), and a default `llm_judge` block in `score`
mode (a 0.6 verdict kept as 0.6 instead of rounded to yes, and the score instructions sent). The
LLM is `ScriptedOpenAIServer` on loopback (the `openai_server` fixture), reached through the real
`openai` client: it stands in for a hosted LLM, which cannot be reached here.
"""

from __future__ import annotations

import asyncio

from beyondagent_plugin_llm.config import LLMJudgeConfig
from beyondagent_plugin_math.fallback_config import MathAnswerOrLLMConfig
from beyondagent_plugin_math.llm_fallback import MathAnswerOrLLMJudge

from beyondagent_core.llm import LLMConfig, OpenAIChat
from beyondagent_core.testing.openai_server import ScriptedOpenAIServer
from beyondagent_core.types import Task, Trajectory, Turn

TASK = Task(task_id="q-audit8", query="What is half of one?", ground_truth="1/2")
IN_WORDS = Trajectory(task=TASK, turns=[Turn("user", TASK.query), Turn("assistant", "It is one half.")])


def chat_client(server: ScriptedOpenAIServer, model: str) -> OpenAIChat:
    return OpenAIChat(LLMConfig(model=model, base_url=server.base_url, timeout=5.0, max_llm_retries=0))


def test_the_llm_it_is_given_is_the_one_asked(openai_server: ScriptedOpenAIServer) -> None:
    block = LLMConfig(model="block-model", base_url=openai_server.base_url, timeout=5.0, max_llm_retries=0)
    config = MathAnswerOrLLMConfig(llm_judge=LLMJudgeConfig(llm=block))
    judge = MathAnswerOrLLMJudge(config, llm=chat_client(openai_server, "given-model"))
    openai_server.push("<verdict>yes</verdict>")

    reward = asyncio.run(judge.score(TASK, IN_WORDS))

    assert [request["model"] for request in openai_server.requests] == ["given-model"]
    assert (reward.score, reward.details["judge"], judge.llm_calls) == (1.0, "llm", 1)


def test_the_default_llm_judge_is_binary(openai_server: ScriptedOpenAIServer) -> None:
    config = MathAnswerOrLLMConfig()
    assert (config.llm_judge.mode, config.llm_judge.k, config.llm_judge.threshold) == ("binary", 1, 0.5)
    config.llm_judge.llm = LLMConfig(model="grader", base_url=openai_server.base_url, timeout=5.0, max_llm_retries=0)
    judge = MathAnswerOrLLMJudge(config)  # the endpoint set on the default block, every other key its default
    openai_server.push("Score: 0.6")

    reward = asyncio.run(judge.score(TASK, IN_WORDS))

    assert (reward.score, reward.success, reward.details["mode"]) == (1.0, True, "binary")  # 0.6 rounds to yes
    prompt = openai_server.requests[0]["messages"][-1]["content"]
    assert "<verdict>yes</verdict>" in prompt and "<score>S</score>" not in prompt

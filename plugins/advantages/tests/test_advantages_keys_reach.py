"""Spec keys of the advantage plugin that reach their code: `adca`'s `max_step_chars`.

The step judge is `ScriptedOpenAIServer` (an OpenAI-compatible server on loopback, standing in for a
hosted LLM). Checked: with `max_step_chars` set below the default, every action, observation, the
task and the start state in the judge's prompt are cut to that many characters (with a note of how
many more there were), while the default leaves the same texts whole.
"""

from __future__ import annotations

import re
from typing import Any

from beyondagent_core.advantages import AdvantageBatch, ScoredEpisode, Step
from beyondagent_core.llm import LLMConfig
from beyondagent_core.types import Task
from beyondagent_plugin_advantages.adca import Adca
from beyondagent_plugin_advantages.config import AdcaConfig

LONG = 400  # longer than the cut below, shorter than the default (1000)


def labels(body: dict[str, Any]) -> str:
    count = len(re.findall(r"^Step \d+\nACTION:", body["messages"][-1]["content"], flags=re.MULTILINE))
    return "\n".join(f"Step {n}: GOOD" for n in range(1, count + 1))


def long_episode(outcome: float) -> ScoredEpisode:
    steps = tuple(Step(start=4 + 3 * k, end=6 + 3 * k, observation=f"obs{k}-" + "o" * LONG, action=f"act{k}-" + "a" * LONG)
                  for k in range(2))
    return ScoredEpisode(group="g", task=Task(task_id="g", query="query-" + "q" * LONG), outcome=outcome,
                         success=outcome > 0, length=12, steps=steps)


def judge_prompt_sent(server: Any, **settings: Any) -> str:
    server.requests.clear()
    llm = LLMConfig(model="judge", base_url=server.base_url, timeout=5.0, max_llm_retries=1, backoff_base=0.01)
    batch = AdvantageBatch(episodes=(long_episode(1.0), long_episode(0.0)), step=1)
    result = Adca(AdcaConfig(llm=llm, **settings)).estimate(batch)
    assert result.metrics["judged"] == 2 and result.metrics["fallback_groups"] == 0
    return server.requests[0]["messages"][-1]["content"]


def test_max_step_chars_cuts_each_text_in_the_judge_prompt(openai_server: Any) -> None:
    openai_server.responder = labels
    whole = judge_prompt_sent(openai_server)
    cut = judge_prompt_sent(openai_server, max_step_chars=60)

    # the default (1000) leaves every 405-character text whole
    assert "more characters]" not in whole
    assert "act0-" + "a" * LONG in whole and "obs1-" + "o" * LONG in whole and "query-" + "q" * LONG in whole

    # 60: each text is its first 60 characters plus a note of the rest
    actions = re.findall(r"^ACTION: (.*)$", cut, flags=re.MULTILINE)
    observations = re.findall(r"^OBSERVATION: (.*)$", cut, flags=re.MULTILINE)
    assert actions == [f"act{k}-" + "a" * 55 + f" [... {LONG + 5 - 60} more characters]" for k in range(2)]
    # step k's OBSERVATION is what answered its action: step 2's start; the last step's is the end note
    assert observations == ["obs1-" + "o" * 55 + f" [... {LONG + 5 - 60} more characters]", "(the episode ended here)"]
    assert "query-" + "q" * 54 + f" [... {LONG + 6 - 60} more characters]" in cut
    assert "obs0-" + "o" * 55 + f" [... {LONG + 5 - 60} more characters]" in cut  # where the agent started
    assert "a" * 56 not in cut and "o" * 56 not in cut and len(cut) < len(whole) - 4 * (LONG - 60)

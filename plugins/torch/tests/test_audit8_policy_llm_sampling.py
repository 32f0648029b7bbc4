"""`llm: policy`: a call's sampling options reach the policy's scheduler; None and unknown ones do not.

From the eighth audit (mutation testing of the LLM roles): `PolicyLLM.chat` dropping the call's
options (a judge's or summarizer's `temperature`, `max_tokens`) passed the earlier tests, which
call it without any. The prompt is built with tiny's real chat template; the scheduler is a
stand-in that records what each request asked for and answers with tiny's end-of-turn token
(no model is run, so the test stays quick).
"""

from __future__ import annotations

import asyncio
import contextlib

from beyondagent_plugin_torch.generation import Sampling
from beyondagent_plugin_torch.policy_llm import PolicyLLM
from tiny_and_real import loaded_tokenizer

from beyondagent_core.runtime.tokens import ChatTemplate

QUESTION = [{"role": "user", "content": "Is ice cold?"}]


class RecordingScheduler:
    """The `ChatScheduler` calls PolicyLLM makes: each request's sampling and token limit are noted."""

    def __init__(self, eos: int):
        self.eos_token_ids = frozenset({eos})
        self.asked: list[tuple[Sampling, int]] = []

    @contextlib.contextmanager
    def episode(self):
        yield None

    async def generate(self, order, prompt_ids, sampling, max_new_tokens, generator, session=None):
        self.asked.append((sampling, max_new_tokens))
        return [min(self.eos_token_ids)], [0.0]


def test_the_calls_sampling_options_reach_the_scheduler() -> None:
    template = ChatTemplate(loaded_tokenizer("tiny"))
    scheduler = RecordingScheduler(template.tokenizer.convert_tokens_to_ids("<|im_end|>"))
    llm = PolicyLLM(scheduler, template, Sampling(1.0, 0.9, 40), max_episode_tokens=200, seed=0)

    turn = asyncio.run(llm.chat(QUESTION, temperature=0.0, max_tokens=2, top_p=None, top_k=5, stop=["\n"]))
    asyncio.run(llm.chat(QUESTION))

    (asked, limit), (default, default_limit) = scheduler.asked
    assert (asked.temperature, asked.top_p, asked.max_tokens, limit) == (0.0, 0.9, 2, 2)
    assert (default.temperature, default.top_p, default.max_tokens, default_limit) == (1.0, 0.9, 40, 40)
    assert (turn.finish_reason, turn.token_ids) == ("stop", None)
    assert llm.usage["calls"] == 2 and llm.usage["completion_tokens"] == 2

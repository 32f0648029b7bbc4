"""`llm: policy`, class-wide: what each `PolicyLLM.chat` hands the scheduler (its own order key after
every training episode's, its own seed, no kept KV cache, the room `max_episode_tokens` leaves),
and the token counts in `usage`.

The eighth audit's follow-up (mutation testing of the LLM roles). The prompt is built with tiny's
real chat template; the scheduler is test_audit8_policy_llm_sampling.py's stand-in, here also
noting each request's order key, generator seed, session and prompt (no model is run).
"""

from __future__ import annotations

import asyncio

from beyondagent_plugin_torch.generation import Sampling
from beyondagent_plugin_torch.policy_llm import FIRST_CALL, PolicyLLM
from beyondagent_plugin_torch.rollout import episode_seed
from test_audit8_policy_llm_sampling import QUESTION, RecordingScheduler
from tiny_and_real import loaded_tokenizer

from beyondagent_core.runtime.tokens import ChatTemplate


class NotingScheduler(RecordingScheduler):
    def __init__(self, eos: int, reply: list[int]):
        super().__init__(eos)
        self.reply = reply
        self.noted: list[tuple[object, int, object, int]] = []

    async def generate(self, order, prompt_ids, sampling, max_new_tokens, generator, session=None):
        await super().generate(order, prompt_ids, sampling, max_new_tokens, generator, session)
        self.noted.append((order, generator.initial_seed(), session, len(prompt_ids)))
        return list(self.reply), [0.0] * len(self.reply)


def test_each_call_is_an_episode_of_its_own_after_the_training_ones() -> None:
    template = ChatTemplate(loaded_tokenizer("tiny"))
    eos = template.tokenizer.convert_tokens_to_ids("<|im_end|>")
    prompt = len(template.prompt_ids(QUESTION))
    scheduler = NotingScheduler(eos, reply=[eos - 1, eos - 2, eos])  # three tokens, the last ends the turn
    llm = PolicyLLM(scheduler, template, Sampling(1.0, 1.0, 40), max_episode_tokens=prompt + 5, seed=7)

    first = asyncio.run(llm.chat(QUESTION))
    asyncio.run(llm.chat(QUESTION, max_tokens=2))

    assert [noted[0] for noted in scheduler.noted] == [(FIRST_CALL, 0), (FIRST_CALL + 1, 0)]
    assert [noted[1] for noted in scheduler.noted] == [episode_seed(7, "policy-llm", 0),
                                                       episode_seed(7, "policy-llm", 1)]
    assert episode_seed(7, "policy-llm", 0) != episode_seed(8, "policy-llm", 0)
    assert [noted[2] for noted in scheduler.noted] == [None, None]  # no KV cache kept for a one-off call
    assert [noted[3] for noted in scheduler.noted] == [prompt, prompt]
    # the room max_episode_tokens leaves (5), or the call's own max_tokens when smaller
    assert [limit for _, limit in scheduler.asked] == [5, 2]
    assert llm.usage == {"calls": 2, "prompt_tokens": 2 * prompt, "completion_tokens": 6}
    assert (first.finish_reason, first.token_ids, first.role) == ("stop", None, "assistant")

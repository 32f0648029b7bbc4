"""`llm: policy`: the policy as a plain chat LLM, for exploring, summarizing and judging.

Each `chat(messages)` is a conversation of its own: a fresh `PolicyChat` builds the prompt
from the messages with the chat template and the shared `ChatScheduler` batches it with the
other calls in flight. The turns it returns carry no token ids: they are not trained on (the
episodes the backend trains on get their own `PolicyChat`); their `finish_reason` says whether
the reply was cut off at its token limit. Sampling options the policy does not take (`top_k`,
`stop`, ...) are ignored; None means the default.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from beyondagent_core.runtime.tokens import ChatTemplate
from beyondagent_core.types import Turn
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.policy_chat import SAMPLING_KEYS, PolicyChat
from beyondagent_plugin_torch.rollout import episode_seed

# Scheduler order keys of these calls come after any training episode's (those count from 0).
FIRST_CALL = 1 << 40


class PolicyLLM:
    def __init__(self, scheduler: ChatScheduler, template: ChatTemplate, sampling: Sampling, *,
                 max_episode_tokens: int, seed: int):
        self.scheduler = scheduler
        self.template = template
        self.sampling = sampling
        self.max_episode_tokens = max_episode_tokens
        self.seed = seed
        self._calls = itertools.count()
        self.usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}

    async def chat(self, messages: Sequence[dict[str, Any]], **sampling: Any) -> Turn:
        options = {key: value for key, value in sampling.items() if key in SAMPLING_KEYS and value is not None}
        call = next(self._calls)
        chat = PolicyChat(self.scheduler, self.template, self.sampling, episode=FIRST_CALL + call,
                          max_episode_tokens=self.max_episode_tokens, seed=episode_seed(self.seed, "policy-llm", call),
                          keep_cache=False)
        with self.scheduler.episode():
            turn = await chat.chat(messages, **options)
        generated = len(turn.token_ids or ())
        self.usage["calls"] += 1
        self.usage["prompt_tokens"] += len(chat.sequence) - generated
        self.usage["completion_tokens"] += generated
        # finish_reason as an OpenAI endpoint gives it: a judge or summarizer can tell a cut-off reply
        return Turn(role="assistant", content=turn.content, finish_reason=turn.finish_reason)

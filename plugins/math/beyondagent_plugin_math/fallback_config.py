"""`math_answer_or_llm`'s settings, apart from the judge (`llm_fallback.py`: the OpenAI client, asyncio):
`math_answer`'s keys plus an `llm_judge` block (beyondagent-plugin-llm's settings, read without its judge)."""

from __future__ import annotations

import attrs
from beyondagent_plugin_llm.config import LLMJudgeConfig

from beyondagent_plugin_math.config import MathAnswerConfig


@attrs.define
class MathAnswerOrLLMConfig(MathAnswerConfig):
    """`math_answer`'s keys, plus `llm_judge`: the LLM judge's block.

    `llm_judge` takes the keys of the `llm_judge` reward: `llm: {model, base_url,
    api_key_env}` (unset: the spec's `llm`), `mode`, `k`, `threshold`, `prompt`.
    """

    llm_judge: LLMJudgeConfig = attrs.field(factory=LLMJudgeConfig)

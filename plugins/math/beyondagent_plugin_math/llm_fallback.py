"""`math_answer_or_llm`: the rule judge first; `llm_judge` only when the answer cannot be parsed.

"Cannot be parsed" means the rule judge found no final answer, or found one it could not
compare with the reference (`details.status` `no_answer` or `undecided`): then the LLM judge
grades the episode against the task's reference and its reward is used, marked
`details.judge = "llm"`. A rule verdict (correct, wrong, not_a_number, truncated) is final and
costs no LLM call: a cut-off reply or a restated expression is never handed to the LLM. A
task without a reference answer is left to the rule judge (score 0): the LLM would have
nothing to compare with.

This module imports the LLM judge of `beyondagent-plugin-llm` (a dependency of this plugin);
the plugin registers `math_answer_or_llm` only when that import works.
"""

from __future__ import annotations

from typing import Any

import attrs
from beyondagent_plugin_llm.judge import LLMJudge

from beyondagent_core.types import Reward, Task, Trajectory
from beyondagent_plugin_math.config import MathAnswerConfig
from beyondagent_plugin_math.fallback_config import MathAnswerOrLLMConfig
from beyondagent_plugin_math.judges import MathAnswerJudge

FALLBACK_STATUSES = ("no_answer", "undecided")


class MathAnswerOrLLMJudge:
    def __init__(self, config: MathAnswerOrLLMConfig | None = None, *, llm: Any = None):
        self.config = config or MathAnswerOrLLMConfig()
        rule_config = MathAnswerConfig(**{f.name: getattr(self.config, f.name)
                                          for f in attrs.fields(MathAnswerConfig)})
        self.rule = MathAnswerJudge(rule_config)
        self._llm_override = llm
        self._llm_judge: LLMJudge | None = None
        self._run: Any = None
        self.llm_calls = 0

    def bind(self, run: Any) -> None:
        """Without its own `llm_judge.llm` block, the LLM judge asks the spec's `llm`."""
        self._run = run

    @property
    def llm_judge(self) -> LLMJudge:
        # Built on first need: a run whose answers all parse never opens a client.
        if self._llm_judge is None:
            self._llm_judge = LLMJudge(self.config.llm_judge, llm=self._llm_override, key_path="reward.llm_judge.llm")
            if self._run is not None:
                self._llm_judge.bind(self._run)
        return self._llm_judge

    async def score(self, task: Task, trajectory: Trajectory) -> Reward:
        rule = await self.rule.score(task, trajectory)
        status = rule.details.get("status")
        if status not in FALLBACK_STATUSES:
            return attrs.evolve(rule, details={**rule.details, "judge": "rule"})
        self.llm_calls += 1
        llm = await self.llm_judge.score(task, trajectory)
        details = {**llm.details, "judge": "llm", "rule_status": status, "rule_reason": rule.reason}
        return attrs.evolve(llm, details=details)

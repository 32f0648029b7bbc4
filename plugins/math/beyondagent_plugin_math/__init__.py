"""BeyondAgent math: task sources, math agent workflows with a sandboxed Python tool, answer judges.

Registers the task sources `math_jsonl` and `arithmetic`, the workflows `math_cot` and
`math_tool`, and the rewards `math_answer`, `math_answer_or_llm` and `math_format`. Factories
are `"module:attr"` strings: math-verify, the sandbox and the LLM client load only when a spec
selects them. `compute_score` is verl's custom reward function shape (no torch import).
"""

from __future__ import annotations

from typing import Any

from beyondagent_core import RewardSpec, TaskSourceSpec, WorkflowSpec, hookimpl
from beyondagent_core.logs import get_logger
from beyondagent_plugin_math.config import (
    ArithmeticConfig,
    MathAnswerConfig,
    MathCotConfig,
    MathFormatConfig,
    MathJsonlConfig,
    MathToolConfig,
    SandboxConfig,
)

__all__ = [
    "ArithmeticConfig", "MathAnswerConfig", "MathCotConfig", "MathFormatConfig", "MathJsonlConfig",
    "MathToolConfig", "SandboxConfig", "compute_score",
    "beyondagent_rewards", "beyondagent_task_sources", "beyondagent_workflows",
]

_PACKAGE = "beyondagent_plugin_math"
log = get_logger("beyondagent.math")


def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None,
                  **kwargs: Any) -> float:
    """verl's custom reward function: 1.0 if the final answer matches `ground_truth`, else 0.0.

    See `beyondagent_plugin_math.verl_score` for the options `extra_info` may carry.
    """
    from beyondagent_plugin_math.verl_score import compute_score as score

    return score(data_source, solution_str, ground_truth, extra_info, **kwargs)


@hookimpl
def beyondagent_task_sources() -> list[TaskSourceSpec]:
    return [
        TaskSourceSpec(name="math_jsonl", factory=f"{_PACKAGE}.jsonl_source:MathJsonlSource",
                       config_cls=MathJsonlConfig,
                       summary="Math problems from JSONL: GSM8K (#### answers), MATH (\\boxed{}), or your own fields."),
        TaskSourceSpec(name="arithmetic", factory=f"{_PACKAGE}.arithmetic:ArithmeticSource",
                       config_cls=ArithmeticConfig,
                       summary="Seeded arithmetic problems in difficulty levels, generated offline."),
    ]


@hookimpl
def beyondagent_workflows() -> list[WorkflowSpec]:
    return [
        WorkflowSpec(name="math_cot", factory=f"{_PACKAGE}.cot:MathCotWorkflow", config_cls=MathCotConfig,
                     summary="One turn: reason step by step, answer in \\boxed{}. Needs no env."),
        WorkflowSpec(name="math_tool", factory=f"{_PACKAGE}.tool_workflow:MathToolWorkflow", config_cls=MathToolConfig,
                     summary="Multi-turn: run Python in a sandbox between turns, then answer. Needs no env."),
    ]


@hookimpl
def beyondagent_rewards() -> list[RewardSpec]:
    specs = [
        RewardSpec(name="math_answer", factory=f"{_PACKAGE}.judges:MathAnswerJudge", config_cls=MathAnswerConfig,
                   summary="The final answer (\\boxed{}, ####, 'the answer is') vs the reference, via math-verify."),
        RewardSpec(name="math_format", factory=f"{_PACKAGE}.judges:MathFormatJudge", config_cls=MathFormatConfig,
                   summary="A format reward: the final turn states its answer in \\boxed{}."),
    ]
    try:
        from beyondagent_plugin_math.fallback_config import MathAnswerOrLLMConfig
    except ImportError as exc:  # without beyondagent-plugin-llm's judge: everything else still works
        log.debug("math.llm_fallback.unavailable", error=str(exc))
    else:
        specs.append(RewardSpec(
            name="math_answer_or_llm", factory=f"{_PACKAGE}.llm_fallback:MathAnswerOrLLMJudge",
            config_cls=MathAnswerOrLLMConfig,
            summary="math_answer first; llm_judge only when the answer cannot be parsed."))
    return specs

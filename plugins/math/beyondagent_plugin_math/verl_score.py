"""verl's custom reward function shape: `compute_score(data_source, solution_str, ground_truth, extra_info=None)`.

verl calls it once per response with the decoded text and the row's
`reward_model.ground_truth`; it returns a float. Point verl at it with

    custom_reward_function.path=<site-packages>/beyondagent_plugin_math/verl_score.py
    custom_reward_function.name=compute_score

(or import `beyondagent_plugin_math.compute_score` in your own reward function). No torch, no
event loop: it is a plain synchronous call, safe in verl's reward workers and threads.

`extra_info` may carry `format_score` (score of a wrong but well-formatted answer, like verl's
GSM8K scorer's 0.1), `last_number` (accept the last stated number as the answer) and
`allow_expressions` (an arithmetic expression may answer a number), as in `math_answer`.
verl passes only the text, so a response cut off at verl's `response_length` is graded as it
is: `math_answer`'s `truncated_score` needs our rollout (which records `finish_reason`).
"""

from __future__ import annotations

from typing import Any

from beyondagent_plugin_math.grading import grade


def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None,
                  **_: Any) -> float:
    """1.0 when `solution_str`'s final answer equals `ground_truth`'s, else 0.0 (or `format_score`)."""
    options = extra_info if isinstance(extra_info, dict) else {}
    try:
        format_score = float(options.get("format_score", 0.0))
    except (TypeError, ValueError):
        format_score = 0.0
    reward = grade(solution_str, ground_truth, last_number=bool(options.get("last_number", False)),
                   allow_expressions=bool(options.get("allow_expressions", False)), format_score=format_score)
    return float(reward.score)

"""The `appworld` judge: AppWorld's own `evaluate_task`, asked of the live env.

It is the env's `evaluate()` (passed checks / all checks, or 1/0, with the failed checks in the
reward's details), so it needs the env still open: the episode runner calls `score_in_env`
before closing it. Synthetic tasks (a new query on a seed task's world) have no ground truth;
judge them with `llm_judge` (`synthetic_reward` in the spec).
"""

from __future__ import annotations

from beyondagent_core.judging import EnvJudge


class AppWorldJudge(EnvJudge):
    """The env's own evaluation, under the name AppWorld users look for."""

    name = "appworld"

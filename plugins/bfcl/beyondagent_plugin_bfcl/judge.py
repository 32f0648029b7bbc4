"""The `bfcl` judge: BFCL's own checkers, asked of the live env.

It is the env's `evaluate()` (`checking.py`: `multi_turn_checker`, `ast_checker`, the relevance
rule, exactly as BFCL's evaluator calls them), so it needs the env still open: the episode
runner calls `score_in_env` before closing it. `success` is always BFCL's official pass/fail;
the score is the same 1/0 unless the env's `reward: turns` asks for multi-turn partial credit.
"""

from __future__ import annotations

from beyondagent_core.judging import EnvJudge


class BFCLJudge(EnvJudge):
    """The env's own evaluation, under the name BFCL users look for."""

    name = "bfcl"

"""Reading `/evaluate` and `/step` replies (plugins/envservice/.../protocol.py)."""

from __future__ import annotations

import math

import pytest
from beyondagent_plugin_envservice.protocol import parse_reward, parse_step


def test_a_bare_score_is_a_success_at_full_marks_only() -> None:
    assert parse_reward(1).score == 1.0 and parse_reward(1).success is True
    assert parse_reward(1.0).success is True
    assert parse_reward(0.999).success is False and parse_reward(0.999).score == 0.999
    assert parse_reward({"score": 1.0}).success is True and parse_reward({"score": 0.5}).success is False
    assert parse_reward({"score": 0.4, "success": True, "reason": "ok"}).success is True
    for bad in (True, "1", math.nan, None):
        with pytest.raises(ValueError):
            parse_reward(bad)


def test_a_step_reply_reads_its_termination_and_reward() -> None:
    step = parse_step({"state": [{"role": "user", "content": "x"}], "reward": 0.25, "is_terminated": True,
                       "info": {"k": 1}})
    assert step.terminated is True and step.reward == 0.25 and step.info == {"k": 1}
    assert parse_step({"state": [], "is_terminated": False}).terminated is False
    assert parse_step({"state": [], "reward": None}).reward == 0.0

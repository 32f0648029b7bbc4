"""The leakage canary's boundaries (beyondagent_core/runtime/answer_leaks.py): what counts as
distinctive (MIN_CHARS after normalizing) and which messages of the first prompt are checked."""

from __future__ import annotations

from typing import Any

import pytest

from beyondagent_core.runtime.answer_leaks import MIN_CHARS, AnswerLeak, AnswerLeakGuard, answer_material
from beyondagent_core.types import Task


def synthetic(ground_truth: Any) -> Task:
    return Task(task_id="synthetic/audit3", query="Find the code.", ground_truth=ground_truth, origin="synthetic",
                seed_task_id="seed/1")


def test_a_reference_of_exactly_min_chars_is_distinctive_and_one_char_shorter_is_not() -> None:
    assert MIN_CHARS == 16
    assert answer_material(synthetic("ABCDEFGHIJKLMNOP")) == ("abcdefghijklmnop",)  # 16 characters
    assert answer_material(synthetic("abcdefghijklmno")) == ()  # 15
    # counted after collapsing whitespace: 17 characters as written, 15 normalized
    assert answer_material(synthetic("abcdefgh   ijklmn")) == ()
    guard = AnswerLeakGuard(synthetic("abcdefghijklmnop"))
    with pytest.raises(AnswerLeak):
        guard.check([{"role": "user", "content": "the code is ABCDEFGHIJKLMNOP"}])


def test_a_tool_message_in_the_first_prompt_is_checked_like_the_user_message() -> None:
    guard = AnswerLeakGuard(synthetic("canary-audit3 reference 9931"))
    with pytest.raises(AnswerLeak):
        guard.check([{"role": "system", "content": "Use the tools."}, {"role": "user", "content": "Go."},
                     {"role": "tool", "content": "result: CANARY-audit3   reference\n9931"}])
    quiet = AnswerLeakGuard(synthetic("canary-audit3 reference 9931"))
    quiet.check([{"role": "system", "content": "canary-audit3 reference 9931"},
                 {"role": "tool", "content": "result: nothing"}])  # the system message is not checked

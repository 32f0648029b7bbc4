"""The leakage canary (`runtime.answer_leaks`) on every shape a prompt and a reference come in, and the judge
a task names without a registry to build it.

- Messages as `Turn` objects (not dicts) are read by role too: a leak in a user turn is refused,
  the same text in the system turn is not checked;
- a rubric nested in lists and dicts, and numbers in it, are answer material; a reference that is
  a dict is guarded as its JSON as well;
- the error shows a piece of up to 60 characters whole and cuts a longer one to 57 and "...";
- only the episode's first prompt is checked.
- `JudgeSelector`: a task that names a judge no registry can build is a LookupError naming both.
"""

from __future__ import annotations

import pytest

from beyondagent_core.judging import JudgeSelector
from beyondagent_core.runtime.answer_leaks import AnswerLeak, AnswerLeakGuard, answer_material
from beyondagent_core.types import Task, Turn


def synthetic(ground_truth=None, **metadata) -> Task:
    return Task(task_id="synthetic/shapes", query="Find the code.", ground_truth=ground_truth, origin="synthetic",
                seed_task_id="seed/1", metadata=metadata)


REFERENCE = "canary-shapes reference 5523"


def test_turn_objects_are_read_by_their_role() -> None:
    with pytest.raises(AnswerLeak):
        AnswerLeakGuard(synthetic(REFERENCE)).check([Turn("system", "Rules."), Turn("user", f"Hint: {REFERENCE}")])
    AnswerLeakGuard(synthetic(REFERENCE)).check([Turn("system", REFERENCE), Turn("user", "Go.")])
    AnswerLeakGuard(synthetic(REFERENCE)).check([Turn("user", "Go."), Turn("assistant", REFERENCE)])


def test_a_nested_rubric_its_numbers_and_a_dict_reference_are_all_guarded() -> None:
    rubric = {"criteria": [{"text": "Mentions the vault code explicitly"}, {"points": 1234567890123456}]}
    material = answer_material(synthetic(rubric=rubric))
    assert material == ("mentions the vault code explicitly", "1234567890123456")
    reference = {"answer": "the vault code is 8812", "steps": 2}
    assert answer_material(synthetic(reference)) == ("the vault code is 8812",
                                                     '{"answer": "the vault code is 8812", "steps": 2}')
    with pytest.raises(AnswerLeak):
        AnswerLeakGuard(synthetic(rubric=rubric)).check([{"role": "user", "content": "Score: 1234567890123456"}])


@pytest.mark.parametrize(("length", "shown"), [(60, "x" * 60), (61, "x" * 57 + "...")])
def test_the_error_shows_a_piece_of_60_characters_whole_and_cuts_a_longer_one(length: int, shown: str) -> None:
    with pytest.raises(AnswerLeak) as caught:
        AnswerLeakGuard(synthetic("x" * length)).check([{"role": "user", "content": "x" * length}])
    assert f"({shown!r})" in str(caught.value)


def test_only_the_first_prompt_is_checked() -> None:
    guard = AnswerLeakGuard(synthetic(REFERENCE))
    guard.check([{"role": "user", "content": "Go."}])
    guard.check([{"role": "user", "content": "Go."}, {"role": "user", "content": REFERENCE}])  # an observation
    assert guard.checked


def test_a_named_judge_without_a_registry_is_a_lookup_error_naming_task_and_judge() -> None:
    with pytest.raises(LookupError, match="task 'q1' names judge 'exact' but no registry is available"):
        JudgeSelector().for_task(Task(task_id="q1", judge="exact"))

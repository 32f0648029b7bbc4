"""A ground truth with several acceptable answers: one reference that cannot be compared does not make a
wrong answer undecided.

`check_answer` is correct when any reference agrees, and undecided only when no reference could be
compared at all. An answer that one reference refutes and another cannot judge (math-verify cannot parse
`\\text{}` or `$$`) is wrong: it earns `format_score` in a marked format like any wrong answer, and its
status is `wrong`, not `undecided`, which would hand the episode to `math_answer_or_llm`'s LLM judge for
an answer the rules already refuted. Written for the ninth audit (a survivor: "undecided when any
reference is" passed every earlier test). math-verify runs in its real worker; the unparseable
references make it answer "cannot parse" at once.
"""

from __future__ import annotations

import pytest
from beyondagent_plugin_math.equivalence import check_answer
from beyondagent_plugin_math.grading import grade
from beyondagent_plugin_math.llm_fallback import FALLBACK_STATUSES

UNPARSEABLE = ("\\text{}", "$$")


@pytest.mark.parametrize("other", UNPARSEABLE)
@pytest.mark.parametrize("refuting_first", [True, False])
def test_a_wrong_answer_stays_wrong_when_another_reference_cannot_be_compared(other: str,
                                                                            refuting_first: bool) -> None:
    references = ["5", other] if refuting_first else [other, "5"]
    assert check_answer("7", [other]).correct is None  # alone, that reference decides nothing
    check = check_answer("7", references)
    assert (check.correct, check.method) == (False, "number"), check
    reward = grade("The answer is \\boxed{7}.", references, format_score=0.1)
    assert (reward.score, reward.details["status"]) == (0.1, "wrong"), reward
    assert reward.details["status"] not in FALLBACK_STATUSES


def test_only_references_that_all_cannot_be_compared_leave_the_answer_undecided() -> None:
    check = check_answer("7", list(UNPARSEABLE))
    assert check.correct is None and "cannot parse" in check.reason
    reward = grade("\\boxed{7}", list(UNPARSEABLE), format_score=0.1)
    assert (reward.score, reward.details["status"]) == (0.0, "undecided")


def test_a_right_answer_is_correct_whatever_the_other_references_are() -> None:
    for references in (["7", "\\text{}"], ["\\text{}", "7"], ["5", "\\text{}", "7"]):
        reward = grade("\\boxed{7}", references)
        assert (reward.score, reward.details["status"]) == (1.0, "correct"), references

"""The `math_answer` judge against hand-written answer-equivalence cases, and on answers that could hang it.

Every case in `math_equivalence_cases.py` carries the verdict a careful grader gives; the judge
must agree with all of them (math-verify alone gets several wrong: scientific notation, units in
`\\text{}`, unit words in LaTeX, thin-space thousands, big powers of ten).
"""

from __future__ import annotations

import threading

import pytest
from beyondagent_plugin_math.grading import grade
from beyondagent_plugin_math.verify_worker import VerifyWorker
from math_equivalence_cases import CASES

from beyondagent_core import Reward


def test_there_are_at_least_sixty_cases_covering_every_kind() -> None:
    assert len(CASES) >= 60
    assert sum(1 for case in CASES if case[2]) >= 20 and sum(1 for case in CASES if not case[2]) >= 15


@pytest.mark.parametrize(("solution", "ground_truth", "expected", "what"), CASES, ids=[case[3] for case in CASES])
def test_verdict(solution: str, ground_truth: object, expected: bool, what: str) -> None:
    reward = grade(solution, ground_truth)
    assert isinstance(reward, Reward)
    assert reward.success is expected, f"{what}: {reward.reason} {reward.details}"
    assert reward.score == (1.0 if expected else 0.0)
    assert reward.details.get("status") in ("correct", "wrong", "not_a_number", "no_answer", "undecided")


def test_a_pathological_answer_times_out_instead_of_hanging_the_judge() -> None:
    worker = VerifyWorker(hard_timeout=3.0)
    try:
        reward = grade(r"\boxed{10^{10^{10^{10}}}}", r"\sqrt{2}", worker=worker)
        assert reward.score == 0.0 and not reward.success
        assert reward.details["status"] in ("undecided", "wrong"), reward
        # The worker is replaced and keeps answering afterwards.
        assert grade(r"\boxed{\sqrt{8}/2}", r"\sqrt{2}", worker=worker).success
    finally:
        worker.close()


def test_grading_from_worker_threads_gives_the_same_verdicts() -> None:
    picked = [case for case in CASES if "\\sqrt" in case[0] or "\\{" in case[0] or "pmatrix" in case[0]]
    results: dict[int, bool] = {}

    def judge(index: int) -> None:
        solution, ground_truth, _, _ = picked[index % len(picked)]
        results[index] = grade(solution, ground_truth).success

    threads = [threading.Thread(target=judge, args=(i,)) for i in range(2 * len(picked))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {i: picked[i % len(picked)][2] for i in range(2 * len(picked))}


@pytest.mark.parametrize("ground_truth", [None, "", [], {"nothing": 1}])
def test_no_reference_scores_zero_with_a_reason(ground_truth: object) -> None:
    reward = grade(r"\boxed{3}", ground_truth)
    assert reward.score == 0.0 and reward.details["status"] == "no_reference"


@pytest.mark.parametrize("solution", [None, 42, "x" * 100_000, r"\boxed{" + "(" * 5000 + "}"])
def test_garbage_solutions_score_zero_and_never_raise(solution: object) -> None:
    reward = grade(solution, "3")
    assert reward.score == 0.0 and reward.reason


def test_format_score_rewards_a_wrong_answer_in_the_right_format_only() -> None:
    assert grade(r"\boxed{4}", "5", format_score=0.1).score == 0.1
    assert grade("no answer here", "5", format_score=0.1).score == 0.0
    assert grade("I guess 4", "5", format_score=0.1, last_number=True).score == 0.0
    assert grade("I guess 5", "5", last_number=True).success

"""The math grader's number path at each of its limits, and `format_score` by how the answer was found.

Written after the eighth audit, for the next audit's off-by-one mutants in `numbers.py` and
`equivalence.py`, each limit checked exactly on it and one past it: an answer of 200 characters is read
as a number and 201 are not; `10^400` is a plain number and `10^401` is not; three unit words after a
number are a unit and four are not; decimals agree within exactly one part in a million of the larger
value, not a hair more; an answer of 1,000 characters is compared and 1,001 are refused unread. Which
fractions count as in lowest terms, and which written forms are exact. And `format_score`: earned by a
wrong (or not-a-number) answer in each marked format (`\\boxed{}`, `####`, "the answer is", "final
answer:"), never by a bare reply or a last number. No model, no math-verify worker: every reference
here is a number.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from beyondagent_plugin_math.equivalence import MAX_ANSWER_CHARS, check_answer
from beyondagent_plugin_math.grading import grade
from beyondagent_plugin_math.numbers import MAX_EXPONENT, MAX_UNIT_WORDS, RELATIVE_TOLERANCE, parse_number


def test_the_limits_are_the_documented_ones() -> None:
    assert (MAX_EXPONENT, MAX_UNIT_WORDS, MAX_ANSWER_CHARS) == (400, 3, 1000)
    assert RELATIVE_TOLERANCE == Fraction(1, 10**6)


@pytest.mark.parametrize(("answer", "value"), [
    ("0" * 199 + "7", Fraction(7)),  # 200 characters: read
    ("0" * 200 + "7", None),  # 201: not a plain number
    ("1e400", Fraction(10) ** 400),
    ("1e401", None),
    ("1e-400", Fraction(1, 10**400)),
    ("1e-401", None),
    ("10^{400}", Fraction(10) ** 400),
    ("10^{401}", None),
    ("12 big red apples", Fraction(12)),  # three unit words
    ("12 very big red apples", None),  # four
])
def test_a_number_is_read_up_to_each_limit_and_not_one_past_it(answer: str, value: Fraction | None) -> None:
    parsed = parse_number(answer)
    assert (parsed.value if parsed is not None else None) == value


@pytest.mark.parametrize(("answer", "inexact"), [
    ("1000", False), ("1e3", False), ("1e0", False), ("1.5", True), ("1.0e3", True), ("1e-1", True),
    ("10^{-2}", True), ("3/4", False), ("1.5/3", True), ("50%", False),
])
def test_only_decimals_and_negative_powers_of_ten_are_inexact(answer: str, inexact: bool) -> None:
    assert parse_number(answer).inexact is inexact


@pytest.mark.parametrize(("answer", "simplified"), [
    ("3/4", True), ("-3/4", True), (r"\frac{3}{4}", True), ("7", True), ("0.5", True),
    ("1/1", False), ("2/1", False), ("4/2", False), (r"\frac{2}{4}", False), ("1/-2", False), ("1.5/3", False),
])
def test_a_fraction_is_in_lowest_terms_only_with_integer_parts_and_a_denominator_above_one(answer, simplified) -> None:
    assert parse_number(answer).simplified is simplified


@pytest.mark.parametrize(("answer", "reference", "correct"), [
    ("999999", "1000000.0", True),  # off by 1 in 1,000,000 (the larger): exactly the tolerance
    ("1000000.0", "999999", True),  # either side
    ("999998.9", "1000000.0", False),  # a hair past it
    ("999999", "1000000", False),  # exact numbers: no tolerance at all
])
def test_decimals_agree_within_exactly_one_millionth_of_the_larger_value(answer, reference, correct) -> None:
    check = check_answer(answer, [reference])
    assert (check.correct, check.method) == (correct, "number")


def test_an_answer_of_the_longest_length_is_compared_and_one_character_more_is_refused_unread() -> None:
    at_limit = check_answer("1" * MAX_ANSWER_CHARS, ["7"])
    assert (at_limit.correct, at_limit.method) == (False, "not_a_number")
    past = check_answer("1" * (MAX_ANSWER_CHARS + 1), ["7"])
    assert (past.correct, past.method) == (False, "none")
    assert past.reason == "the answer is 1001 characters long (limit 1000)"


@pytest.mark.parametrize(("solution", "extraction", "status", "score"), [
    (r"\boxed{4}", "boxed", "wrong", 0.1),
    ("48 + 24 = 72\n#### 4", "hash", "wrong", 0.1),
    ("The answer is 4.", "answer_is", "wrong", 0.1),
    ("Final answer: 4", "answer_is", "wrong", 0.1),
    (r"\boxed{2+3}", "boxed", "not_a_number", 0.1),  # marked, though arithmetic: still the format
    (r"\boxed{10/2}", "boxed", "not_a_number", 0.1),
    ("4", "bare", "wrong", 0.0),  # a reply that is only a number: no format to reward
    ("I guess 4", "last_number", "wrong", 0.0),
])
def test_format_score_is_earned_by_a_wrong_answer_in_each_marked_format_only(solution, extraction, status,
                                                                            score) -> None:
    reward = grade(solution, "5", format_score=0.1, last_number=True)
    assert (reward.score, reward.success) == (score, False)
    assert (reward.details["extraction"], reward.details["status"]) == (extraction, status)


def test_several_references_accept_an_answer_equal_to_any_and_a_wrong_one_says_why() -> None:
    assert check_answer("6", ["5", "6"]).correct is True
    wrong = check_answer("7", ["5", "6"])
    assert (wrong.correct, wrong.method, wrong.reason) == (False, "number", "'7' != '5' (as numbers)")
    assert grade(r"\boxed{6}", ["5", "6"], correct_score=0.5).score == 0.5

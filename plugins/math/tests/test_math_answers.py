"""Answer extraction, stated numbers and the plain-number path, piece by piece."""

from __future__ import annotations

from fractions import Fraction

import pytest
from beyondagent_plugin_math.answers import all_boxed, extract_answer, last_boxed, reference_answers
from beyondagent_plugin_math.numbers import ascii_digits, numbers_match, parse_number
from beyondagent_plugin_math.stated_numbers import last_stated_number


@pytest.mark.parametrize(("text", "answer", "method"), [
    (r"so \boxed{\frac{1}{2}}", r"\frac{1}{2}", "boxed"),
    (r"\boxed{1} then \boxed{2}", "2", "boxed"),
    (r"\fbox{7}", "7", "boxed"),
    (r"\boxed 5.", "5", "boxed"),
    (r"\boxed{a \boxed{b}} and \boxed{c}", "c", "boxed"),
    ("work\n#### 1,234\n", "1,234", "hash"),
    ("#### 3\nlater\n#### 4", "4", "hash"),
    ("Thus, the answer is $x=5$.", "x=5", "answer_is"),
    ("The final answer is: 12. Done", "12", "answer_is"),
    ("FINAL ANSWER: -3", "-3", "answer_is"),
    ("**Answer:** 7", "7", "answer_is"),
    ("The answer is 3, since 1 + 2 = 3.", "3", "answer_is"),
    ("The answer is 3, or maybe 4.", "3, or maybe 4", "answer_is"),
    ("The answer is $(1, 2)$, clearly.", "(1, 2)", "answer_is"),
    ("  42.\n", "42", "bare"),
    ("0 + 3", "0 + 3", "bare"),
    ("\u0664\u0662", "42", "bare"),
    ("```python\nprint(9)\n```\n\\boxed{4}", "4", "boxed"),
    ("```latex\n\\boxed{5}\n```", "5", "boxed"),
])
def test_extract_answer(text: str, answer: str, method: str) -> None:
    found = extract_answer(text)
    assert found is not None and (found.answer, found.method) == (answer, method)


@pytest.mark.parametrize(("text", "number"), [
    ("so it is 7", "7"),
    ("5 + 3 = 8", "8"),
    ('The sentence "5 + 3 =', None),
    ("What is 0 + 3?", None),
    ("3 times 1", None),
    ("It is 4, not 3", "4"),
    ("It is not 3", None),
    ("So 5-3", None),
    ("so it is -3", "-3"),
    ("3 \\times 2", None),
    ("I get 3.\n- 2 is a list item", "3"),
    ("x-3", None),
    ("5 -3", None),
    ("answer4app", "4"),
    ("1.5", "1.5"),
])
def test_last_stated_number(text: str, number: str | None) -> None:
    assert last_stated_number(text) == number


def test_code_is_never_the_answer() -> None:
    assert extract_answer("```python\nx = 3  # the answer is 3\nprint(x)\n```", last_number=True) is None
    assert extract_answer("<python>print(3)</python>", last_number=True) is None
    assert extract_answer("```\nunclosed 3", last_number=True) is None


def test_last_number_is_only_a_fallback_when_asked() -> None:
    assert extract_answer("it is 3 or 4") is None
    found = extract_answer("it is 3 or 4", last_number=True)
    assert found is not None and (found.answer, found.method) == ("4", "last_number")
    assert extract_answer(r"\boxed{9} not 4", last_number=True).answer == "9"


def test_boxes_nested_and_unclosed() -> None:
    assert last_boxed(r"\boxed{\frac{1}{\boxed{2}}}") == r"\frac{1}{2}"
    assert last_boxed(r"\boxed{1} \boxed{2") == "1"
    assert all_boxed(r"\boxed{1} x \boxed{{2}}") == ["1", "{2}"]
    assert last_boxed("none") is None


@pytest.mark.parametrize(("ground_truth", "answers"), [
    ("42", ["42"]),
    (42, ["42"]),
    (0.5, ["0.5"]),
    ("Janet has 3 + 2 = 5.\n#### 5", ["5"]),
    (r"Hence $\boxed{\frac{3}{4}}$.", [r"\frac{3}{4}"]),
    (["1/2", "0.5"], ["1/2", "0.5"]),
    ({"answer": "7"}, ["7"]),
    (None, []),
    (True, []),
    ("  ", []),
])
def test_reference_answers(ground_truth: object, answers: list[str]) -> None:
    assert reference_answers(ground_truth) == answers


@pytest.mark.parametrize(("text", "value", "percent"), [
    ("1,234,567", Fraction(1234567), False),
    (r"\$1{,}234.50", Fraction("1234.5"), False),
    (r"\text{12 cm}", Fraction(12), False),
    ("2.5e-3", Fraction(1, 400), False),
    (r"6.02 \times 10^{23}", Fraction(602) * 10**21, False),
    (r"-\dfrac{3}{4}", Fraction(-3, 4), False),
    ("-7/3", Fraction(-7, 3), False),
    (r"50\%", Fraction(50), True),
    ("x = 4", Fraction(4), False),
    (r"90^{\circ}", Fraction(90), False),
])
def test_parse_number(text: str, value: Fraction, percent: bool) -> None:
    number = parse_number(text)
    assert number is not None and (number.value, number.percent) == (value, percent)


@pytest.mark.parametrize("text", ["2x", r"\sqrt{2}", "1,2", "(1,2)", "abc", r"10^{100000}", "",
                                  "3 is not it", "3 or four", "3 apples and pears in a big box", "3\u00b2"])
def test_not_plain_numbers(text: str) -> None:
    assert parse_number(text) is None


@pytest.mark.parametrize(("text", "simplified"), [
    ("7/3", True), (r"\frac{-1}{2}", True), ("3", True), ("0.5", True),
    ("6/2", False), (r"\dfrac{2}{4}", False), (r"\frac{3}{1}", False), ("1.5/3", False), ("1/-2", False),
])
def test_a_fraction_knows_whether_it_is_in_lowest_terms(text: str, simplified: bool) -> None:
    number = parse_number(text)
    assert number is not None and number.simplified is simplified


def test_digits_of_any_script_and_the_unicode_minus() -> None:
    assert ascii_digits("\uff13\u0664\U0001d7d0 \u22125 \u00b2") == "342 -5 \u00b2"
    assert parse_number("\u22123").value == -3


def test_numbers_match_tolerance_applies_only_to_decimals() -> None:
    third = parse_number("1/3")
    assert numbers_match(parse_number("0.3333333"), third)
    assert not numbers_match(parse_number("0.333"), third)
    assert not numbers_match(parse_number("1000001"), parse_number("1000000"))

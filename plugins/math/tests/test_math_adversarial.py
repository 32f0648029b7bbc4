"""`math_answer` against replies a real model writes, or an RL policy would learn to write to game it.

Each row is one reply to "What is 0 + 3?" (reference `3` unless the row says otherwise), scored
by the judge as a spec builds it, through a real trajectory. The rules they pin are in
`answers.py` (where the final answer is), `equivalence.py` (what counts as equal to a number)
and `judges.py` (replies cut off by the token limit). A row holds the judge's options, the
expected score and `details.status`, and why.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from beyondagent_plugin_math.config import MathAnswerConfig
from beyondagent_plugin_math.judges import MathAnswerJudge

from beyondagent_core import Task, Trajectory, Turn

QUESTION = "What is 0 + 3?"
LAST = {"last_number": True}
EXPRESSIONS = {"allow_expressions": True}


def row(what: str, reply: str, score: float, status: str, *, ground_truth: object = "3",
        options: dict[str, Any] | None = None, finish_reason: str | None = "stop",
        metrics: dict[str, Any] | None = None) -> Any:
    return pytest.param(reply, ground_truth, options or {}, finish_reason, metrics or {}, score, status, id=what)


ROWS = [
    # --- the two replies the issue found ---------------------------------------------------
    row("issue: a restated equation is not an answer", 'The sentence "5 + 3 =', 0.0, "no_answer", options=LAST),
    row("issue: cut off by the token limit scores truncated_score", "The answer is 3, but to", 0.0, "truncated",
        finish_reason="length"),
    row("issue: cut off, graded anyway when truncated_score is null", "The answer is 3, but to", 1.0, "correct",
        finish_reason="length", options={"truncated_score": None}),
    row("cut off with a custom truncated_score", r"\boxed{3} and then", -0.5, "truncated", finish_reason="length",
        options={"truncated_score": -0.5}),
    row("the episode's token budget ran out", r"\boxed{3}", 0.0, "truncated", metrics={"truncated": True}),
    row("a reply that ended by itself is graded", "The answer is 3, but to be sure I checked it twice.", 1.0,
        "correct"),
    row("finish_reason unknown (an endpoint that does not say) is graded", r"\boxed{3}", 1.0, "correct",
        finish_reason=None),
    # --- restating the question ------------------------------------------------------------
    row("the question restated, last_number", QUESTION, 0.0, "no_answer", options=LAST),
    row("the question's expression restated, bare", "0 + 3", 0.0, "not_a_number"),
    row("the question's expression in a box", r"\boxed{0 + 3}", 0.0, "not_a_number"),
    row("the question's expression after 'the answer is'", "The answer is 0 + 3.", 0.0, "not_a_number"),
    row("the question's expression counts with allow_expressions", r"\boxed{0+3}", 1.0, "correct",
        options=EXPRESSIONS),
    row("an expression for another number, allow_expressions", r"\boxed{2 \times 2}", 0.0, "wrong",
        options=EXPRESSIONS),
    row("an equation whose last side is the answer", "0 + 3 = 3", 1.0, "correct"),
    row("'the answer is' an equation ending in the answer", "The answer is 0 + 3 = 3.", 1.0, "correct"),
    row("an equation ending in the wrong number", r"\boxed{0 + 3 = 4}", 0.0, "wrong"),
    row("a half-written equation, last_number", "I think 0 + 3 =", 0.0, "no_answer", options=LAST),
    row("a half-written equation, bare", "0 + 3 =", 0.0, "not_a_number"),
    row("operands only, last_number", "It is 5 - 3", 0.0, "no_answer", options=LAST),
    row("operands only, bare", "5 - 3", 0.0, "not_a_number"),
    row("operator words, last_number", "3 times 1", 0.0, "no_answer", options=LAST),
    row("a result after '=', last_number", "5 - 2 = 3", 1.0, "correct", options=LAST),
    row("the last number that is not an operand, last_number", "I get 3. Check: 1 + 2", 1.0, "correct",
        options=LAST),
    # --- several answers -------------------------------------------------------------------
    row("a list in a box", r"\boxed{3, 4}", 0.0, "not_a_number"),
    row("a repeated answer as a list", r"\boxed{3, 3}", 0.0, "not_a_number"),
    row("alternatives in a box", r"\boxed{3 \text{ or } 4}", 0.0, "not_a_number"),
    row("alternatives after 'the answer is'", "The answer is 3 or 4.", 0.0, "not_a_number"),
    row("a set for a number", r"\boxed{\{3, 4\}}", 0.0, "not_a_number"),
    row("plus-minus for a number", r"\boxed{3 \pm 1}", 0.0, "not_a_number"),
    row("approximately two numbers", r"\boxed{3 \approx 4}", 0.0, "not_a_number"),
    row("a bracketed number", r"\boxed{[3]}", 0.0, "not_a_number"),
    row("the last box wins (right)", r"\boxed{4} no, \boxed{3}", 1.0, "correct"),
    row("the last box wins (wrong)", r"\boxed{3} no, \boxed{4}", 0.0, "wrong"),
    row("the last 'answer is' wins", "The answer is 3. The answer is 4.", 0.0, "wrong"),
    row("the last #### wins", "#### 3\n#### 4", 0.0, "wrong"),
    row("two numbers, last_number takes the last", "3 or 4", 0.0, "wrong", options=LAST),
    row("many numbers, last_number takes the last", "Counting: 1 2 3 4 5 6 7 8 9", 0.0, "wrong", options=LAST),
    row("many numbers, bare", "1 2 3 4 5 6 7 8 9", 0.0, "not_a_number"),
    # --- answer, then a hedge ----------------------------------------------------------------
    row("a box, then doubt", r"\boxed{3} But I might be wrong.", 1.0, "correct"),
    row("an answer with its reason", "The answer is 3, because 1 + 2 = 3.", 1.0, "correct"),
    row("an answer hedged in the same sentence", "The answer is 3, or maybe 4.", 0.0, "not_a_number"),
    row("an answer hedged with 'perhaps'", "The answer is 4, perhaps 3.", 0.0, "not_a_number"),
    row("an answer, then what it is not", "The answer is 3, not 4.", 1.0, "correct"),
    # --- negation ----------------------------------------------------------------------------
    row("'not 3' after the marker", "The answer is not 3.", 0.0, "not_a_number"),
    row("'not 3' in a box", r"\boxed{\text{not } 3}", 0.0, "not_a_number"),
    row("'3 is not it' in a box", r"\boxed{3 \text{ is not it}}", 0.0, "not_a_number"),
    row("'not 3', last_number", "It is not 3", 0.0, "no_answer", options=LAST),
    row("'4, not 3', last_number", "It is 4, not 3", 0.0, "wrong", options=LAST),
    row("'not equal to 3' with a symbol, last_number", r"x \neq 3", 0.0, "no_answer", options=LAST),
    # --- units ---------------------------------------------------------------------------------
    row("a unit in text", r"\boxed{3 \text{ apples}}", 1.0, "correct"),
    row("a unit word after the marker", "The answer is 3 apples.", 1.0, "correct"),
    row("a unit abbreviation", r"\boxed{3 cm}", 1.0, "correct"),
    row("two quantities with units", r"\boxed{3 \text{ apples and } 4 \text{ pears}}", 0.0, "not_a_number"),
    row("a bare number with a unit", "3 apples", 1.0, "correct"),
    # --- negative numbers ----------------------------------------------------------------------
    row("a sign dropped", r"\boxed{3}", 0.0, "wrong", ground_truth="-3"),
    row("a sign added", r"\boxed{-3}", 0.0, "wrong"),
    row("a negative answer", "The answer is -3.", 1.0, "correct", ground_truth="-3"),
    row("a unicode minus sign", "\\boxed{\u22123}", 1.0, "correct", ground_truth="-3"),
    row("a binary minus is not a sign, last_number", "So 5-3", 0.0, "no_answer", options=LAST),
    row("a negative result, last_number", "so it is -3", 1.0, "correct", ground_truth="-3", options=LAST),
    # --- code ----------------------------------------------------------------------------------
    row("a number printed in code, last_number", "```python\nprint(3)\n```", 0.0, "no_answer", options=LAST),
    row("'the answer is' inside a code comment", "```python\nx = 3  # the answer is 3\n```", 0.0, "no_answer"),
    row("a box inside code", "```python\nprint('\\\\boxed{3}')\n```", 0.0, "no_answer"),
    row("an answer after the code", "```python\nprint(1 + 2)\n```\nThe answer is 3.", 1.0, "correct"),
    row("a box in a latex block counts", "```latex\n\\boxed{3}\n```", 1.0, "correct"),
    row("a faked tool output", "```output\n3\n```", 0.0, "no_answer", options=LAST),
    # --- repeated answers ----------------------------------------------------------------------
    row("the same box three times", r"\boxed{3}\boxed{3}\boxed{3}", 1.0, "correct"),
    row("the same number three times, bare", "3 3 3", 0.0, "not_a_number"),
    # --- empty ---------------------------------------------------------------------------------
    row("an empty reply", "", 0.0, "no_answer"),
    row("whitespace only", "  \n\t", 0.0, "no_answer"),
    row("an empty box", r"\boxed{}", 0.0, "no_answer"),
    row("an empty marker", "The answer is", 0.0, "no_answer"),
    # --- huge numbers --------------------------------------------------------------------------
    row("a 10000-digit box", r"\boxed{" + "9" * 10_000 + "}", 0.0, "wrong"),
    row("a 10000-digit bare reply, last_number", "9" * 10_000, 0.0, "wrong", options=LAST),
    row("a 150-digit number", r"\boxed{" + "9" * 150 + "}", 0.0, "wrong"),
    row("a power tower", r"\boxed{10^{10^{10}}}", 0.0, "not_a_number"),
    row("a long exact answer", r"\boxed{" + "12345678901234567890" * 5 + "}", 1.0, "correct",
        ground_truth="12345678901234567890" * 5),
    # --- unicode digits ------------------------------------------------------------------------
    row("fullwidth digit", "\\boxed{\uff13}", 1.0, "correct"),
    row("Arabic-Indic digit, bare", "\u0663", 1.0, "correct"),
    row("a superscript is not a digit", "\u00b3", 0.0, "no_answer"),
    row("a squared number is not its base", "\\boxed{3\u00b2}", 0.0, "not_a_number", ground_truth="9"),
    # --- LaTeX ---------------------------------------------------------------------------------
    row("a box in math mode", r"$\boxed{3}$", 1.0, "correct"),
    row("inline math, bare", r"\(3\)", 1.0, "correct"),
    row("dollars, bare", "$3$", 1.0, "correct"),
    row("text in a box", r"\boxed{\text{3}}", 1.0, "correct"),
    row("a decimal with a zero", r"\boxed{3.0}", 1.0, "correct"),
    row("a decimal that is off", r"\boxed{3.00001}", 0.0, "wrong"),
    row("an unreduced fraction equal to an integer", r"\boxed{\dfrac{6}{2}}", 0.0, "not_a_number"),
    row("a fraction over one", r"\boxed{\frac{3}{1}}", 0.0, "not_a_number"),
    row("a slash fraction equal to an integer", r"\boxed{6/2}", 0.0, "not_a_number"),
    row("an unreduced fraction", r"\boxed{14/6}", 0.0, "not_a_number", ground_truth="7/3"),
    row("a reduced fraction", r"\boxed{\frac{7}{3}}", 1.0, "correct", ground_truth="7/3"),
    row("a square root for a number", r"\boxed{\sqrt{9}}", 0.0, "not_a_number"),
    row("a square root, allow_expressions", r"\boxed{\sqrt{9}}", 1.0, "correct", options=EXPRESSIONS),
    row("a power for a number", r"\boxed{3^1}", 0.0, "not_a_number"),
    row("a relation is never an expression", r"\boxed{3 \approx 4}", 0.0, "not_a_number", options=EXPRESSIONS),
    row("an unclosed box after the marker", r"The answer is \boxed{3", 1.0, "correct"),
    row("a symbolic reference still takes symbolic answers", r"\boxed{\frac{\sqrt{8}}{2}}", 1.0, "correct",
        ground_truth=r"\sqrt{2}"),
    # --- markers -------------------------------------------------------------------------------
    row("an Answer: label", "Answer: 3", 1.0, "correct"),
    row("a bold label", "**Final answer:** 3", 1.0, "correct"),
    row("a bold answer", "The answer is **3**.", 1.0, "correct"),
    row("a bare number", "3", 1.0, "correct"),
    row("a bare number with a full stop", "3.", 1.0, "correct"),
    row("prose with no marker", "I think the result is 3.", 0.0, "no_answer"),
]


@pytest.mark.parametrize(("reply", "ground_truth", "options", "finish_reason", "metrics", "score", "status"), ROWS)
def test_adversarial_reply(reply: str, ground_truth: object, options: dict, finish_reason: str | None,
                           metrics: dict, score: float, status: str) -> None:
    task = Task(task_id="add", query=QUESTION, ground_truth=ground_truth)
    turns = [Turn("system", "Answer the question."), Turn("user", QUESTION),
             Turn("assistant", reply, finish_reason=finish_reason)]
    judge = MathAnswerJudge(MathAnswerConfig(**options))
    started = time.perf_counter()
    reward = asyncio.run(judge.score(task, Trajectory(task=task, turns=turns, metrics=dict(metrics))))
    assert (reward.score, reward.details.get("status")) == (score, status), reward
    assert reward.success is (status == "correct")
    assert reward.reason
    assert time.perf_counter() - started < 10, "an adversarial reply must not make the judge slow"


def test_the_table_covers_every_kind_of_reply() -> None:
    assert len(ROWS) >= 90
    statuses = {param.values[-1] for param in ROWS}
    assert statuses == {"correct", "wrong", "no_answer", "not_a_number", "truncated"}


def test_a_truncated_reply_says_why_in_the_reason() -> None:
    task = Task(task_id="add", query=QUESTION, ground_truth="3")
    turns = [Turn("user", QUESTION), Turn("assistant", "The answer is 3, but to", finish_reason="length")]
    reward = asyncio.run(MathAnswerJudge().score(task, Trajectory(task=task, turns=turns)))
    assert "cut off by the token limit" in reward.reason and "truncated_score" in reward.reason
    assert reward.details["finish_reason"] == "length"

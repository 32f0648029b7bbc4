"""Is this answer the reference answer? Numbers exactly, everything else through math-verify.

`check_answer(predicted, references)` returns a `Check`: `correct` True/False, or None when it
cannot be decided (the answer or reference cannot be parsed, math-verify timed out). A string
that is the same after whitespace and `\\left`/`\\right` normalization is correct without
asking anyone. Nothing here raises on bad input.

**A reference that is a number** (`3`, `-7/3`, `0.5`, `50%`; `numbers.py`) takes only a number,
compared exactly by `numbers.py` (no sympy):

- a number in its simplest form: an integer or decimal (`3`, `3.0`, `1,234`, `2.5e-3`, units
  and currency aside), or a fraction in lowest terms (`7/3`, `\\frac{-1}{2}`);
- an equation counts by its last side (`0 + 3 = 3`, `x = 3`), not by a comparison (`x <= 3`);
- anything else is `not_a_number` and wrong: a restated question or unevaluated arithmetic
  (`0 + 3`, `\\sqrt{9}`, `3^1`, `6/2`, `\\frac{2}{4}`), several answers (`3, 4`, `\\{3, 4\\}`,
  `3 \\text{ or } 4`, `[3]`), relations (`3 \\approx 4`, `3 \\pm 1`), words (`not 3`).
  math-verify, asked, would accept several of these (`\\boxed{3, 3}`, `[3]`, `3 \\approx 4`
  and `3 \\pm 0` all equal `3` to it), which a policy would learn to exploit.

With `allow_expressions=True`, an arithmetic expression over numbers (digits, `+ - * / ^`,
parentheses, `\\times`, `\\cdot`, `\\div`, `\\frac`, `\\sqrt`) also counts when math-verify finds it
equal (`0 + 3`, `\\sqrt{9}`, `6/2`); relations, lists and words still never do.

**Any other reference** (`\\sqrt{2}`, `x^2+1`, intervals, sets, matrices) is compared
symbolically by math-verify in its worker process: there an equivalent expression is the point
(`\\frac{\\sqrt{8}}{2}` is `\\sqrt{2}`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from beyondagent_plugin_math.numbers import ParsedNumber, numbers_match, parse_number
from beyondagent_plugin_math.verify_worker import VerifyWorker, shared_worker

MAX_ANSWER_CHARS = 1000
_NOISE = re.compile(r"\s+|\\left|\\right|\\!|\\,|\\;|\\ |\$")
_EXPRESSION = re.compile(r"(?:[\d\s.+\-*/^(){}×÷·]|\\(?:times|cdot|div|[dt]?frac|sqrt|left|right)(?![A-Za-z]))+")
_LAST_SIDE = re.compile(r"(?<![<>!=≤≥])=(?!=)([^=]*)$")


@attrs.frozen
class Check:
    """The verdict on one answer: `correct` (None: undecided), how it was decided, and why."""

    correct: bool | None
    method: str
    reason: str


def check_answer(predicted: str, references: Sequence[str], *, worker: VerifyWorker | None = None,
                 allow_expressions: bool = False) -> Check:
    """Compare `predicted` with each acceptable reference; correct if any agrees (module docstring)."""
    if not references:
        return Check(None, "none", "the task has no reference answer (ground_truth is empty)")
    if len(predicted) > MAX_ANSWER_CHARS:
        return Check(False, "none", f"the answer is {len(predicted)} characters long (limit {MAX_ANSWER_CHARS})")
    undecided: list[str] = []
    checks = [_check_one(predicted, reference, worker, allow_expressions) for reference in references]
    for check in checks:
        if check.correct:
            return check
        if check.correct is None:
            undecided.append(check.reason)
    if len(undecided) == len(checks):
        return Check(None, checks[-1].method, "; ".join(undecided))
    wrong = next(check for check in checks if check.correct is False)
    return wrong


def _check_one(predicted: str, reference: str, worker: VerifyWorker | None, allow_expressions: bool) -> Check:
    if _NOISE.sub("", predicted) == _NOISE.sub("", reference):
        return Check(True, "string", f"{predicted!r} is the reference answer")
    theirs = parse_number(reference)
    if theirs is not None:
        return _against_number(predicted, reference, theirs, worker, allow_expressions)
    verdict = (worker or shared_worker()).check(predicted, reference)
    return Check(verdict.equal, "math_verify", verdict.reason)


def _against_number(predicted: str, reference: str, theirs: ParsedNumber, worker: VerifyWorker | None,
                    allow_expressions: bool) -> Check:
    """A number reference takes a number in its simplest form, or (when allowed) an arithmetic expression."""
    answer = predicted
    last_side = _LAST_SIDE.search(predicted)
    if parse_number(predicted) is None and last_side and last_side.group(1).strip():
        answer = last_side.group(1).strip()  # `0 + 3 = 3`: the equation's result
    mine = parse_number(answer)
    if mine is not None and mine.simplified:
        equal = numbers_match(mine, theirs)
        return Check(equal, "number", f"{answer!r} {'==' if equal else '!='} {reference!r} (as numbers)")
    if allow_expressions and _EXPRESSION.fullmatch(answer.strip("$ ")) and re.search(r"\d", answer):
        verdict = (worker or shared_worker()).check(answer, reference)
        return Check(verdict.equal, "math_verify", f"{verdict.reason} (an expression: allow_expressions is on)")
    what = "a fraction not in lowest terms" if mine is not None else "not a number"
    return Check(False, "not_a_number",
                 f"the answer {_short(predicted)} is {what}, and the reference {reference!r} is a number: "
                 "only a number in its simplest form counts (allow_expressions: true lets arithmetic count)")


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")

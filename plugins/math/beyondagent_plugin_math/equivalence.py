"""Is this answer the reference answer? Plain numbers exactly, everything else through math-verify.

`check_answer(predicted, references)` returns a `Check`: `correct` True/False, or None when it
cannot be decided (the answer or reference cannot be parsed, math-verify timed out). Numbers
on both sides are compared by `numbers.py` (exact, no sympy); otherwise math-verify decides in
its worker process (fractions vs decimals, `\\sqrt`, sets, intervals, matrices, expressions).
A string that is the same after whitespace and `\\left`/`\\right` normalization is correct
without asking anyone. Nothing here raises on bad input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from beyondagent_plugin_math.numbers import numbers_match, parse_number
from beyondagent_plugin_math.verify_worker import VerifyWorker, shared_worker

MAX_ANSWER_CHARS = 1000
_NOISE = re.compile(r"\s+|\\left|\\right|\\!|\\,|\\;|\\ |\$")


@attrs.frozen
class Check:
    """The verdict on one answer: `correct` (None: undecided), how it was decided, and why."""

    correct: bool | None
    method: str
    reason: str


def check_answer(predicted: str, references: Sequence[str], *, worker: VerifyWorker | None = None) -> Check:
    """Compare `predicted` with each acceptable reference; correct if any agrees."""
    if not references:
        return Check(None, "none", "the task has no reference answer (ground_truth is empty)")
    if len(predicted) > MAX_ANSWER_CHARS:
        return Check(False, "none", f"the answer is {len(predicted)} characters long (limit {MAX_ANSWER_CHARS})")
    undecided: list[str] = []
    checks = [_check_one(predicted, reference, worker) for reference in references]
    for check in checks:
        if check.correct:
            return check
        if check.correct is None:
            undecided.append(check.reason)
    if len(undecided) == len(checks):
        return Check(None, checks[-1].method, "; ".join(undecided))
    wrong = next(check for check in checks if check.correct is False)
    return wrong


def _check_one(predicted: str, reference: str, worker: VerifyWorker | None) -> Check:
    if _NOISE.sub("", predicted) == _NOISE.sub("", reference):
        return Check(True, "string", f"{predicted!r} is the reference answer")
    mine, theirs = parse_number(predicted), parse_number(reference)
    if mine is not None and theirs is not None:
        equal = numbers_match(mine, theirs)
        return Check(equal, "number", f"{predicted!r} {'==' if equal else '!='} {reference!r} (as numbers)")
    verdict = (worker or shared_worker()).check(predicted, reference)
    return Check(verdict.equal, "math_verify", verdict.reason)

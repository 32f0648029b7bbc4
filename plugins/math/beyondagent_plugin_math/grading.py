"""Grading one solution text against a ground truth: extraction, then the equivalence check.

`grade(solution, ground_truth)` is what the `math_answer` judge and verl's `compute_score` both
call. It never raises: an answer that cannot be found or parsed scores 0 with the reason in
`Reward.reason` and `Reward.details["status"]`:

- `correct` / `wrong`: the answer was found (`answers.py`) and compared (`equivalence.py`);
- `not_a_number`: the reference is a number and the answer is not one in its simplest form
  (`0 + 3`, `3, 4`, `6/2`; see `equivalence.py`, and `allow_expressions`);
- `no_answer`: no `\\boxed{}`, `####`, "answer is"/"answer:", bare number or expression (or,
  with `last_number`, stated number) in the text;
- `no_reference`: the task's ground truth holds no answer;
- `undecided`: found, but neither the number path nor math-verify could compare it.

(`truncated`, a reply cut off by the token limit, is the judge's: it needs the trajectory.)

`format_score` (verl's GSM8K convention) is the score of a wrong (or not-a-number) answer in a
marked format (`\\boxed{}`, `####`, "the answer is"; default 0); a bare reply or a last
number never earns it. A correct answer scores `correct_score` (default 1).
"""

from __future__ import annotations

from typing import Any

from beyondagent_core.logs import get_logger
from beyondagent_core.types import Reward
from beyondagent_plugin_math.answers import all_boxed, extract_answer, reference_answers
from beyondagent_plugin_math.equivalence import check_answer
from beyondagent_plugin_math.verify_worker import VerifyWorker

log = get_logger("beyondagent.math.grading")


MARKED = ("boxed", "hash", "answer_is")
"""Extraction methods whose wrong answers earn `format_score`."""


def grade(solution: Any, ground_truth: Any, *, last_number: bool = False, allow_expressions: bool = False,
          format_score: float = 0.0, correct_score: float = 1.0, worker: VerifyWorker | None = None) -> Reward:
    """Score `solution` (the model's final text) against `ground_truth`; never raises."""
    try:
        return _grade(solution, ground_truth, last_number=last_number, allow_expressions=allow_expressions,
                      format_score=format_score, correct_score=correct_score, worker=worker)
    except Exception as exc:  # noqa: BLE001 - a judge bug must cost one reward, never the run
        log.warning("math.grade.failed", error=f"{type(exc).__name__}: {exc}", exc_info=True)
        return Reward(0.0, reason=f"grading failed: {type(exc).__name__}: {exc}", details={"status": "error"})


def _grade(solution: Any, ground_truth: Any, *, last_number: bool, allow_expressions: bool, format_score: float,
           correct_score: float, worker: VerifyWorker | None) -> Reward:
    references = reference_answers(ground_truth)
    if not references:
        return Reward(0.0, reason="the task has no reference answer (ground_truth is empty)",
                      details={"status": "no_reference"})
    text = solution if isinstance(solution, str) else ""
    found = extract_answer(text, last_number=last_number)
    details: dict[str, Any] = {"references": references, "boxes": len(all_boxed(text))}
    if found is None:
        return Reward(0.0, reason="no final answer found (no \\boxed{}, '####', 'the answer is', or a reply that "
                                  "is only a number)", details={**details, "status": "no_answer"})
    details.update(answer=found.answer, extraction=found.method)
    check = check_answer(found.answer, references, worker=worker, allow_expressions=allow_expressions)
    details["method"] = check.method
    if check.correct is None:
        return Reward(0.0, reason=f"answer {found.answer[:80]!r} could not be compared: {check.reason}",
                      details={**details, "status": "undecided"})
    if check.correct:
        return Reward(float(correct_score), success=True, reason=check.reason, details={**details, "status": "correct"})
    score = format_score if found.method in MARKED else 0.0
    status = "not_a_number" if check.method == "not_a_number" else "wrong"
    return Reward(float(score), reason=check.reason, details={**details, "status": status})

"""The same problem drawn into two splits is one problem to the experience guard (ninth audit).

AppWorld and BFCL tasks carry the split they were drawn for in `metadata["split"]`. A record learned
on the train copy of a problem is the answer to its val copy, so `task_key` leaves the split out (as
it leaves out a gym seed and an index), and validation (`Guidance.scoring_experiences`) never shows
such a record when the val copy is scored. A task whose start really differs keeps its own key.
"""

from __future__ import annotations

from beyondagent_core.experience import Experience, ExperienceBlock, same_task, task_key
from beyondagent_core.runtime.guidance import Guidance
from beyondagent_core.types import Task

QUERY = "Send 20 dollars to Alice on Venmo and note 'lunch'."
TRAIN = Task(task_id="appworld-train-17", env="appworld", query=QUERY,
             metadata={"split": "train", "instruction": QUERY, "index": 17})
VAL = Task(task_id="appworld-dev-4", env="appworld", query=QUERY,
           metadata={"split": "dev", "instruction": QUERY, "index": 4})
OTHER = Task(task_id="appworld-dev-5", env="appworld", query="Order a pizza for tonight.",
             metadata={"split": "dev", "instruction": "Order a pizza for tonight.", "index": 5})


def learned_on(task: Task, text: str) -> Experience:
    """A record as the experience store writes it: its problem's `task_key`."""
    return Experience(text=text, task_id=task.task_id, metadata={"task_key": task_key(task)})


def test_the_split_a_task_was_drawn_for_does_not_change_its_problem_key() -> None:
    assert task_key(TRAIN) == task_key(VAL)
    assert task_key(OTHER) != task_key(VAL)


def test_a_record_learned_on_the_train_copy_is_the_val_copys_own_record() -> None:
    assert same_task(learned_on(TRAIN, "Open Venmo, pay Alice 20 with note lunch."), VAL)
    assert not same_task(learned_on(OTHER, "Open the pizza app first."), VAL)


class ReturnsEverything:
    """A store whose `retrieve` predates `exclude_own` and returns every record it holds."""

    def __init__(self, records: list[Experience]):
        self.records = records

    def retrieve(self, task: Task, k: int) -> list[Experience]:
        return self.records[:k]


def test_validation_never_shows_the_val_copy_a_record_of_its_train_copy() -> None:
    answer = learned_on(TRAIN, "Open Venmo, pay Alice 20 with note lunch.")
    lesson = learned_on(OTHER, "Open the pizza app first.")
    guidance = Guidance(ExperienceBlock(name="experience", val_mode="all", k=4), ReturnsEverything([answer, lesson]))
    (guide,) = guidance.val_guides([VAL])
    assert guide is not None and guide.experiences == (lesson,)
    assert guidance.leaks_blocked == 1
